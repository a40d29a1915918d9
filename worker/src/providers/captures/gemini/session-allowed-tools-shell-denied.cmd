# exit status 0; run in /tmp/pam-capture/gemini-session-allowed-tools-shell-denied/repo (a git repository: yes)
argv: gemini --output-format stream-json --approval-mode auto_edit --allowed-tools run_shell_command\(touch\) -p Run\ a\ script.
env: HOME PATH LANG TERM GEMINI_API_KEY GOOGLE_GEMINI_BASE_URL GEMINI_CLI_TRUST_WORKSPACE
# chat: $HOME/.gemini/tmp/repo/chats/session-2026-12-07T21-24-fedd2860.jsonl (4222 bytes, 11 lines) -> session-allowed-tools-shell-denied.chat.jsonl
