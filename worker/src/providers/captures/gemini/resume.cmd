# exit status 0; run in /tmp/pam-capture/gemini-two-step-usage/repo (a git repository: yes)
argv: gemini --output-format stream-json --approval-mode auto_edit --resume 12d17b4c-227b-4263-adc4-6e47391f1cb6 -p What\ did\ you\ just\ do\?
env: HOME PATH LANG TERM GEMINI_API_KEY GOOGLE_GEMINI_BASE_URL GEMINI_CLI_TRUST_WORKSPACE
