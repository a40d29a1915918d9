# exit status 0; run in /tmp/pam-capture/gemini-session-first-held/repo (a git repository: yes)
argv: gemini --output-format stream-json -p Say\ hi.
env: HOME PATH LANG TERM GEMINI_API_KEY GOOGLE_GEMINI_BASE_URL GEMINI_CLI_TRUST_WORKSPACE
# chat-during (turn request 1 held, the CLI waiting on it): $HOME/.gemini/tmp/repo/chats/session-2026-12-07T21-24-2a497bfd.jsonl (1282 bytes, 4 lines) -> session-first-held.chat-during.jsonl
# then turn request 1 released
# chat: $HOME/.gemini/tmp/repo/chats/session-2026-12-07T21-24-2a497bfd.jsonl (1571 bytes, 6 lines) -> session-first-held.chat.jsonl
