# exit status 0; run in /tmp/pam-capture/gemini-session-usage-on-disk-during-tool/repo (a git repository: yes)
argv: gemini --output-format stream-json --approval-mode yolo -p Count\ the\ usage\ records.
env: HOME PATH LANG TERM GEMINI_API_KEY GOOGLE_GEMINI_BASE_URL GEMINI_CLI_TRUST_WORKSPACE
# chat: $HOME/.gemini/tmp/repo/chats/session-2026-12-07T21-24-55cb5888.jsonl (3530 bytes, 11 lines) -> session-usage-on-disk-during-tool.chat.jsonl
