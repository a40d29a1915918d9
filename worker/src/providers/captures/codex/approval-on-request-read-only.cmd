# exit status 0; run in /tmp/pam-capture/codex-approval-on-request-read-only/repo (a git repository: yes)
argv: codex exec --json --sandbox read-only -c approval_policy=\"on-request\" Create\ hello.txt\ containing\ a\ greeting.
env: HOME PATH LANG TERM PAM_MODEL_API_KEY
