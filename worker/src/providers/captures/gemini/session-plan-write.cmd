# exit status 0; run in /tmp/pam-capture/gemini-session-plan-write/repo (a git repository: yes)
argv: gemini --output-format stream-json --approval-mode plan -p Create\ hello.txt\ containing\ a\ greeting.
env: HOME PATH LANG TERM GEMINI_API_KEY GOOGLE_GEMINI_BASE_URL GEMINI_CLI_TRUST_WORKSPACE
# chat: $HOME/.gemini/tmp/repo/chats/session-2026-12-07T21-24-de3cb98e.jsonl (3860 bytes, 11 lines) -> session-plan-write.chat.jsonl
