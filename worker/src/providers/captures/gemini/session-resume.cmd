# exit status 0; run in /tmp/pam-capture/gemini-session-two-step/repo (a git repository: yes)
argv: gemini --output-format stream-json --approval-mode auto_edit --resume a0ed4db4-6e13-487e-8201-1964e0f7363a -p What\ did\ you\ just\ do\?
env: HOME PATH LANG TERM GEMINI_API_KEY GOOGLE_GEMINI_BASE_URL GEMINI_CLI_TRUST_WORKSPACE
# chat: $HOME/.gemini/tmp/repo/chats/session-2026-12-07T21-21-a0ed4db4.jsonl (8182 bytes, 17 lines) -> session-resume.chat.jsonl
