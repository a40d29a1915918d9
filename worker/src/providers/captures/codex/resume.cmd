# exit status 0; run in /tmp/pam-capture/codex-two-step-usage/repo (a git repository: yes)
argv: codex exec resume --json -c sandbox_mode=\"workspace-write\" 01a25251-d360-7cb1-ac12-dac9dc53df5a What\ did\ you\ just\ do\?
env: HOME PATH LANG TERM PAM_MODEL_API_KEY
