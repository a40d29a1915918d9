# exit status 0; run in /tmp/pam-capture/gemini-default-shell/repo (a git repository: yes)
argv: gemini --output-format stream-json --approval-mode default -p Touch\ a\ file.
env: HOME PATH LANG TERM GEMINI_API_KEY GOOGLE_GEMINI_BASE_URL GEMINI_CLI_TRUST_WORKSPACE
