# exit status 0; run in /tmp/pam-capture/gemini-session-two-step/repo (a git repository: yes)
argv: gemini --output-format stream-json --approval-mode auto_edit --resume 5374015f-8f6e-41e4-a524-a1cc5e4dc496 -p What\ did\ you\ just\ do\?
env: HOME PATH LANG TERM GEMINI_API_KEY GOOGLE_GEMINI_BASE_URL GEMINI_CLI_TRUST_WORKSPACE
# chat: $HOME/.gemini/tmp/repo/chats/session-2026-12-07T21-23-5374015f.jsonl (8182 bytes, 17 lines) -> session-resume.chat.jsonl
# chat: $HOME/.gemini/tmp/repo/chats/session-2026-12-07T21-24-5374015f.jsonl (1117 bytes, 2 lines) -> session-resume.chat.other1.jsonl
