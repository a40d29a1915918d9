# exit status 0; run in /tmp/pam-capture/gemini-two-step-usage/repo (a git repository: yes)
argv: gemini --output-format stream-json --approval-mode auto_edit --resume 6c2aad79-807a-4711-9e5b-9b2aff89715b -p What\ did\ you\ just\ do\?
env: HOME PATH LANG TERM GEMINI_API_KEY GOOGLE_GEMINI_BASE_URL GEMINI_CLI_TRUST_WORKSPACE
