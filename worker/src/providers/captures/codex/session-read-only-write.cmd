# exit status 0; run in /tmp/pam-capture/codex-session-read-only-write/repo (a git repository: yes)
argv: codex exec --json --sandbox read-only Create\ hello.txt\ containing\ a\ greeting.
env: HOME PATH LANG TERM PAM_MODEL_API_KEY
# rollout: $HOME/.codex/sessions/2026/12/07/rollout-2026-12-07T21-21-42-01a25262-4870-7b91-86f8-7115fc698e89.jsonl (44641 bytes, 18 lines) -> session-read-only-write.rollout.jsonl
