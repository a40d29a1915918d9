# exit status 1; run in /tmp/pam-capture/codex-api-error-429/repo (a git repository: yes)
argv: codex exec --json Say\ hi.
env: HOME PATH LANG TERM PAM_MODEL_API_KEY
