# exit status 0; run in /tmp/pam-capture/claude-api-error-529-recovers/repo (a git repository: yes)
argv: claude -p Say\ hi. --output-format stream-json --verbose
env: HOME PATH LANG TERM ANTHROPIC_BASE_URL ANTHROPIC_API_KEY DISABLE_TELEMETRY DISABLE_ERROR_REPORTING DISABLE_AUTOUPDATER CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC CLAUDE_CODE_MAX_RETRIES
