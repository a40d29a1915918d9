# exit status 0; run in /tmp/pam-capture/gemini-auto_edit-write/repo (a git repository: yes)
argv: gemini --output-format stream-json --approval-mode auto_edit -p Create\ hello.txt\ containing\ a\ greeting.
env: HOME PATH LANG TERM GEMINI_API_KEY GOOGLE_GEMINI_BASE_URL GEMINI_CLI_TRUST_WORKSPACE
