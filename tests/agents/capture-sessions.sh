# Session-file scenarios for capture.sh (target "sessions"): what codex's
# rollout and gemini's chat file hold, during a run (a held turn) and
# after it, for live usage and for denials the stream does not show.
# Sourced, not run.

# Two responses with distinct usage; the second is held so the files can
# be read while the CLI waits on it.
SESSION_TWO_STEP='{"turns": [
  {"write_file": {"path": "hello.txt", "content": "hello from pam\n"},
   "preamble": "I will create hello.txt.",
   "usage": {"input_tokens": 1500, "cached_input_tokens": 300, "output_tokens": 45}},
  {"text": {"text": "Created hello.txt."}, "hold": "before_headers",
   "usage": {"input_tokens": 70, "cached_input_tokens": 1800, "output_tokens": 9}}
]}'

SESSION_FIRST_HELD='{"turns": [
  {"text": {"text": "Hi."}, "hold": "before_headers",
   "usage": {"input_tokens": 900, "cached_input_tokens": 0, "output_tokens": 3}}
]}'

# The first answer paced, its SSE events $1 ms apart.
session_paced() {
  cat <<EOF
{"turns": [
  {"write_file": {"path": "hello.txt", "content": "hello from pam\\n"},
   "preamble": "I will create hello.txt.", "pace_ms": $1,
   "usage": {"input_tokens": 1500, "cached_input_tokens": 300, "output_tokens": 45}},
  {"text": {"text": "Created hello.txt."},
   "usage": {"input_tokens": 70, "cached_input_tokens": 1800, "output_tokens": 9}}
]}
EOF
}

SESSION_RESUME='{"turns": [
  {"text": {"text": "I created hello.txt."},
   "usage": {"input_tokens": 40, "cached_input_tokens": 1900, "output_tokens": 7}}
]}'

session_denied() {
  # $1: the tool turn that gets denied.
  cat <<EOF
{"turns": [
  $1,
  {"text": {"text": "It was refused."},
   "usage": {"input_tokens": 90, "cached_input_tokens": 1200, "output_tokens": 8}}
]}
EOF
}

SESSION_WRITE='{"write_file": {"path": "hello.txt", "content": "hello from pam\n"},
   "usage": {"input_tokens": 1200, "cached_input_tokens": 0, "output_tokens": 40}}'
session_cmd() {
  # JSON-escapes the command line.
  local c=${1//\\/\\\\}
  c=${c//\"/\\\"}
  printf '{"run_command": {"command": "%s"}, "usage": {"input_tokens": 300, "cached_input_tokens": 900, "output_tokens": 20}}' "$c"
}

capture_sessions_codex() {
  local exec=(codex exec --json)
  echo "$SESSION_TWO_STEP" | capture codex session-two-step --during 2 -- \
    "${exec[@]}" --sandbox workspace-write "Create hello.txt containing a greeting."

  # The stream's turn.completed is cumulative over the thread; the rollout
  # (the same file, appended to) has the new response on its own.
  local tid
  tid=$(session_id codex session-two-step)
  echo "$SESSION_RESUME" | capture codex session-resume --reuse session-two-step --session -- \
    codex exec resume --json -c 'sandbox_mode="workspace-write"' "$tid" "What did you just do?"

  # What is on disk before the first response.
  echo "$SESSION_FIRST_HELD" | capture codex session-first-held --during 1 -- \
    "${exec[@]}" "Say hi."

  # pam stopping a run while it waits on its second model call.
  echo "$SESSION_TWO_STEP" | capture codex session-stopped --during 2 --stop -- \
    "${exec[@]}" --sandbox workspace-write "Create hello.txt containing a greeting."

  # A command that reads the rollout while codex waits for it: is the
  # usage of the response that asked for it already on disk? (The ["]
  # keep the pattern from matching the command's own record.)
  session_denied "$(session_cmd 'grep -o '"'"'response_id["]:["][a-z0-9_]*["],["]usage["]:{[^}]*}'"'"' $HOME/.codex/sessions/*/*/*/rollout-*.jsonl')" |
    capture codex session-usage-on-disk-during-tool --session -- \
      "${exec[@]}" --sandbox danger-full-access "Count the usage records."

  # Half-way through a streamed answer: 13 events 300 ms apart, the
  # preamble's output_item.done at 2.1 s, response.completed at 3.6 s.
  session_paced 300 | capture codex session-mid-response --during 1 --after 2800 -- \
    "${exec[@]}" --sandbox workspace-write "Create hello.txt containing a greeting."

  # Denials that the --json stream does not show.
  session_denied "$SESSION_WRITE" | capture codex session-read-only-write --session -- \
    "${exec[@]}" --sandbox read-only "Create hello.txt containing a greeting."
  session_denied "$(session_cmd 'touch made-by-shell.txt')" |
    capture codex session-read-only-command --session -- \
      "${exec[@]}" --sandbox read-only "Touch a file."
  session_denied "$(session_cmd 'touch /var/tmp/pam-codex-outside.txt')" |
    capture codex session-workspace-write-outside --session -- \
      "${exec[@]}" --sandbox workspace-write "Touch a file."
  rm -f /var/tmp/pam-codex-outside.txt
}

capture_sessions_gemini() {
  local p=(gemini --output-format stream-json)
  echo "$SESSION_TWO_STEP" | capture gemini session-two-step --during 2 -- \
    "${p[@]}" --approval-mode auto_edit -p "Create hello.txt containing a greeting."

  local sid
  sid=$(session_id gemini session-two-step)
  echo "$SESSION_RESUME" | capture gemini session-resume --reuse session-two-step --session -- \
    "${p[@]}" --approval-mode auto_edit --resume "$sid" -p "What did you just do?"

  echo "$SESSION_FIRST_HELD" | capture gemini session-first-held --during 1 -- \
    "${p[@]}" -p "Say hi."

  echo "$SESSION_TWO_STEP" | capture gemini session-stopped --during 2 --stop -- \
    "${p[@]}" --approval-mode auto_edit -p "Create hello.txt containing a greeting."

  session_denied "$(session_cmd 'grep -o '"'"'tokens["]:{[^}]*}'"'"' $HOME/.gemini/tmp/*/chats/session-*.jsonl')" |
    capture gemini session-usage-on-disk-during-tool --session -- \
      "${p[@]}" --approval-mode yolo -p "Count the usage records."

  # Two chunks 3 s apart: the preamble, then the call with the usage.
  session_paced 3000 | capture gemini session-mid-response --during 1 --after 1500 -- \
    "${p[@]}" --approval-mode auto_edit -p "Create hello.txt containing a greeting."

  # The three kinds of refusal: tool not declared in this mode, command
  # outside the allow list, write outside plan mode's directory.
  session_denied "$SESSION_WRITE" | capture gemini session-default-write --session -- \
    "${p[@]}" --approval-mode default -p "Create hello.txt containing a greeting."
  session_denied "$(session_cmd "python3 -c 'print(42)'")" |
    capture gemini session-allowed-tools-shell-denied --session -- \
      "${p[@]}" --approval-mode auto_edit --allowed-tools "run_shell_command(touch)" -p "Run a script."
  session_denied "$SESSION_WRITE" | capture gemini session-plan-write --session -- \
    "${p[@]}" --approval-mode plan -p "Create hello.txt containing a greeting."
}

capture_sessions() {
  capture_sessions_codex
  capture_sessions_gemini
}
