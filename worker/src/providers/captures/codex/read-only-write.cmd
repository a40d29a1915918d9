# exit status 0; run in /tmp/pam-capture/codex-read-only-write/repo (a git repository: yes)
argv: codex exec --json --sandbox read-only Create\ hello.txt\ containing\ a\ greeting.
env: HOME PATH LANG TERM PAM_MODEL_API_KEY
