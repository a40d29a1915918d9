# exit status 0; run in /tmp/pam-capture/codex-two-step-usage/repo (a git repository: yes)
argv: codex exec resume --json -c sandbox_mode=\"workspace-write\" 01a2524a-7c57-7801-a5d4-058195e193d9 What\ did\ you\ just\ do\?
env: HOME PATH LANG TERM PAM_MODEL_API_KEY
