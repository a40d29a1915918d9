# exit status 0; run in /tmp/pam-capture/codex-two-step-usage/repo (a git repository: yes)
argv: codex exec resume --json -c sandbox_mode=\"workspace-write\" 01a25250-8277-7e70-b790-07c22397bd3d What\ did\ you\ just\ do\?
env: HOME PATH LANG TERM PAM_MODEL_API_KEY
