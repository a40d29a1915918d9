# exit status 0; run in /tmp/pam-capture/codex-session-mid-response/repo (a git repository: yes)
argv: codex exec --json --sandbox workspace-write Create\ hello.txt\ containing\ a\ greeting.
env: HOME PATH LANG TERM PAM_MODEL_API_KEY
# rollout-during (2800 ms after turn request 1 arrived): $HOME/.codex/sessions/2026/12/07/rollout-2026-12-07T21-21-37-01a25262-3485-7a82-ba73-ec80ea9af1fe.jsonl (44029 bytes, 11 lines) -> session-mid-response.rollout-during.jsonl
# rollout: $HOME/.codex/sessions/2026/12/07/rollout-2026-12-07T21-21-37-01a25262-3485-7a82-ba73-ec80ea9af1fe.jsonl (50359 bytes, 21 lines) -> session-mid-response.rollout.jsonl
