# exit status 0; run in /tmp/pam-capture/codex-session-first-held/repo (a git repository: yes)
argv: codex exec --json Say\ hi.
env: HOME PATH LANG TERM PAM_MODEL_API_KEY
# rollout-during (turn request 1 held, the CLI waiting on it): $HOME/.codex/sessions/2026/12/07/rollout-2026-12-07T21-21-32-01a25262-230c-7af2-a02c-b72b64067135.jsonl (38880 bytes, 9 lines) -> session-first-held.rollout-during.jsonl
# then turn request 1 released
# rollout: $HOME/.codex/sessions/2026/12/07/rollout-2026-12-07T21-21-32-01a25262-230c-7af2-a02c-b72b64067135.jsonl (41865 bytes, 14 lines) -> session-first-held.rollout.jsonl
