# exit status 0; run in /tmp/pam-capture/codex-read-only-command/repo (a git repository: yes)
argv: codex exec --json --sandbox read-only Touch\ a\ file.
env: HOME PATH LANG TERM PAM_MODEL_API_KEY
