# exit status 0; run in /tmp/pam-capture/codex-session-two-step/repo (a git repository: yes)
argv: codex exec resume --json -c sandbox_mode=\"workspace-write\" 01a25262-1a29-7fe0-a73f-8f24ed986df6 What\ did\ you\ just\ do\?
env: HOME PATH LANG TERM PAM_MODEL_API_KEY
# rollout: $HOME/.codex/sessions/2026/12/07/rollout-2026-12-07T21-21-30-01a25262-1a29-7fe0-a73f-8f24ed986df6.jsonl (59114 bytes, 31 lines) -> session-resume.rollout.jsonl
