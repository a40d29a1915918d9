# exit status 0; run in /tmp/pam-capture/gemini-session-two-step/repo (a git repository: yes)
argv: gemini --output-format stream-json --approval-mode auto_edit -p Create\ hello.txt\ containing\ a\ greeting.
env: HOME PATH LANG TERM GEMINI_API_KEY GOOGLE_GEMINI_BASE_URL GEMINI_CLI_TRUST_WORKSPACE
# chat-during (turn request 2 held, the CLI waiting on it): $HOME/.gemini/tmp/repo/chats/session-2026-12-07T21-23-5374015f.jsonl (3528 bytes, 9 lines) -> session-two-step.chat-during.jsonl
# then turn request 2 released
# chat: $HOME/.gemini/tmp/repo/chats/session-2026-12-07T21-23-5374015f.jsonl (3837 bytes, 11 lines) -> session-two-step.chat.jsonl
