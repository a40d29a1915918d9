# exit status 0; run in /tmp/pam-capture/codex-no-git-repo-skip-check/repo (a git repository: no)
argv: codex exec --json --skip-git-repo-check Say\ hi.
env: HOME PATH LANG TERM PAM_MODEL_API_KEY
