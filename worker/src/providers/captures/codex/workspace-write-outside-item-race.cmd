# exit status 0; run in /tmp/pam-capture/codex-workspace-write-outside/repo (a git repository: yes)
argv: codex exec --json --sandbox workspace-write Touch\ a\ file.
env: HOME PATH LANG TERM PAM_MODEL_API_KEY
