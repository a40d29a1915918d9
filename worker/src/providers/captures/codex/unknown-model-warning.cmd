# exit status 0; run in /tmp/pam-capture/codex-unknown-model-warning/repo (a git repository: yes)
argv: codex exec --json -m gpt-5-codex Say\ hi.
env: HOME PATH LANG TERM PAM_MODEL_API_KEY
