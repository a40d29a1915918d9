# exit status 0; run in /tmp/pam-capture/codex-session-two-step/repo (a git repository: yes)
argv: codex exec --json --sandbox workspace-write Create\ hello.txt\ containing\ a\ greeting.
env: HOME PATH LANG TERM PAM_MODEL_API_KEY
# rollout-during (turn request 2 held, the CLI waiting on it): $HOME/.codex/sessions/2026/12/07/rollout-2026-12-07T21-21-30-01a25262-1a29-7fe0-a73f-8f24ed986df6.jsonl (47146 bytes, 16 lines) -> session-two-step.rollout-during.jsonl
# then turn request 2 released
# rollout: $HOME/.codex/sessions/2026/12/07/rollout-2026-12-07T21-21-30-01a25262-1a29-7fe0-a73f-8f24ed986df6.jsonl (50204 bytes, 21 lines) -> session-two-step.rollout.jsonl
