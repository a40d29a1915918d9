# exit status 0; run in /tmp/pam-capture/codex-bypass-approvals-and-sandbox/repo (a git repository: yes)
argv: codex exec --json --dangerously-bypass-approvals-and-sandbox Create\ hello.txt\ containing\ a\ greeting.
env: HOME PATH LANG TERM PAM_MODEL_API_KEY
