# exit status 0; run in /tmp/pam-capture/gemini-session-stopped/repo (a git repository: yes)
argv: gemini --output-format stream-json --approval-mode auto_edit -p Create\ hello.txt\ containing\ a\ greeting.
env: HOME PATH LANG TERM GEMINI_API_KEY GOOGLE_GEMINI_BASE_URL GEMINI_CLI_TRUST_WORKSPACE
# chat-during (turn request 2 held, the CLI waiting on it): $HOME/.gemini/tmp/repo/chats/session-2026-12-07T21-24-d48b53bb.jsonl (3521 bytes, 9 lines) -> session-stopped.chat-during.jsonl
# then SIGTERM to the CLI
# chat: $HOME/.gemini/tmp/repo/chats/session-2026-12-07T21-24-d48b53bb.jsonl (3521 bytes, 9 lines) -> session-stopped.chat.jsonl
