# exit status 0; run in /tmp/pam-capture/codex-danger-full-access/repo (a git repository: yes)
argv: codex exec --json --sandbox danger-full-access Create\ hello.txt\ containing\ a\ greeting.
env: HOME PATH LANG TERM PAM_MODEL_API_KEY
