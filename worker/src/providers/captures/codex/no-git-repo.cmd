# exit status 1; run in /tmp/pam-capture/codex-no-git-repo/repo (a git repository: no)
argv: codex exec --json Say\ hi.
env: HOME PATH LANG TERM PAM_MODEL_API_KEY
