# exit status 143; run in /tmp/pam-capture/codex-session-stopped/repo (a git repository: yes)
argv: codex exec --json --sandbox workspace-write Create\ hello.txt\ containing\ a\ greeting.
env: HOME PATH LANG TERM PAM_MODEL_API_KEY
# rollout-during (turn request 2 held, the CLI waiting on it): $HOME/.codex/sessions/2026/12/07/rollout-2026-12-07T21-21-34-01a25262-2896-70d0-93ef-8762e59c1e97.jsonl (47107 bytes, 16 lines) -> session-stopped.rollout-during.jsonl
# then SIGTERM to the CLI
# rollout: $HOME/.codex/sessions/2026/12/07/rollout-2026-12-07T21-21-34-01a25262-2896-70d0-93ef-8762e59c1e97.jsonl (47107 bytes, 16 lines) -> session-stopped.rollout.jsonl
