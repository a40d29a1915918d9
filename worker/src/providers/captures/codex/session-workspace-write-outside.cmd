# exit status 0; run in /tmp/pam-capture/codex-session-workspace-write-outside/repo (a git repository: yes)
argv: codex exec --json --sandbox workspace-write Touch\ a\ file.
env: HOME PATH LANG TERM PAM_MODEL_API_KEY
# rollout: $HOME/.codex/sessions/2026/12/07/rollout-2026-12-07T21-21-45-01a25262-5425-7132-8d50-f1398cc111eb.jsonl (49051 bytes, 18 lines) -> session-workspace-write-outside.rollout.jsonl
