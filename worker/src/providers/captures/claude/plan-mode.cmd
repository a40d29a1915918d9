# exit status 0; run in /tmp/pam-capture/claude-plan-mode/repo (a git repository: yes)
argv: claude -p Create\ hello.txt\ containing\ a\ greeting. --output-format stream-json --verbose --permission-mode plan
env: HOME PATH LANG TERM ANTHROPIC_BASE_URL ANTHROPIC_API_KEY DISABLE_TELEMETRY DISABLE_ERROR_REPORTING DISABLE_AUTOUPDATER CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC
