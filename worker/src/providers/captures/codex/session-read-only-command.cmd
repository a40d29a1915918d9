# exit status 0; run in /tmp/pam-capture/codex-session-read-only-command/repo (a git repository: yes)
argv: codex exec --json --sandbox read-only Touch\ a\ file.
env: HOME PATH LANG TERM PAM_MODEL_API_KEY
# rollout: $HOME/.codex/sessions/2026/12/07/rollout-2026-12-07T21-21-43-01a25262-4e17-7b22-8383-211d010875ef.jsonl (44685 bytes, 18 lines) -> session-read-only-command.rollout.jsonl
