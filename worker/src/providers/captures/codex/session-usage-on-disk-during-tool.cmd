# exit status 0; run in /tmp/pam-capture/codex-session-usage-on-disk-during-tool/repo (a git repository: yes)
argv: codex exec --json --sandbox danger-full-access Count\ the\ usage\ records.
env: HOME PATH LANG TERM PAM_MODEL_API_KEY
# rollout: $HOME/.codex/sessions/2026/12/07/rollout-2026-12-07T21-21-35-01a25262-2edd-7cc2-b547-d0542ceffe95.jsonl (45770 bytes, 19 lines) -> session-usage-on-disk-during-tool.rollout.jsonl
