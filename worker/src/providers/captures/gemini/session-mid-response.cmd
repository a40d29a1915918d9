# exit status 0; run in /tmp/pam-capture/gemini-session-mid-response/repo (a git repository: yes)
argv: gemini --output-format stream-json --approval-mode auto_edit -p Create\ hello.txt\ containing\ a\ greeting.
env: HOME PATH LANG TERM GEMINI_API_KEY GOOGLE_GEMINI_BASE_URL GEMINI_CLI_TRUST_WORKSPACE
# chat-during (1500 ms after turn request 1 arrived): $HOME/.gemini/tmp/repo/chats/session-2026-12-07T21-24-53c2b557.jsonl (1320 bytes, 4 lines) -> session-mid-response.chat-during.jsonl
# chat: $HOME/.gemini/tmp/repo/chats/session-2026-12-07T21-24-53c2b557.jsonl (3865 bytes, 11 lines) -> session-mid-response.chat.jsonl
