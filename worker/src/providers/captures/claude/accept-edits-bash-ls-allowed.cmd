# exit status 0; run in /tmp/pam-capture/claude-accept-edits-bash-ls-allowed/repo (a git repository: yes)
argv: claude -p List\ the\ files. --output-format stream-json --verbose --permission-mode acceptEdits --allowedTools Bash\(ls:\*\)
env: HOME PATH LANG TERM ANTHROPIC_BASE_URL ANTHROPIC_API_KEY DISABLE_TELEMETRY DISABLE_ERROR_REPORTING DISABLE_AUTOUPDATER CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC
