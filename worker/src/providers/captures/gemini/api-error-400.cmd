# exit status 144; run in /tmp/pam-capture/gemini-api-error-400/repo (a git repository: yes)
argv: gemini --output-format stream-json -p Say\ hi.
env: HOME PATH LANG TERM GEMINI_API_KEY GOOGLE_GEMINI_BASE_URL GEMINI_CLI_TRUST_WORKSPACE
