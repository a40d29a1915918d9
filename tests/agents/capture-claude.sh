# Claude Code scenarios for capture.sh. Sourced, not run.

# Write hello.txt, then say so: the two turns most scenarios need.
claude_write_then_text() {
  cat <<'EOF'
{"turns": [
  {"write_file": {"path": "hello.txt", "content": "hello from pam\n"},
   "usage": {"input_tokens": 1200, "cached_input_tokens": 0, "output_tokens": 40}},
  {"text": {"text": "Finished."},
   "usage": {"input_tokens": 60, "cached_input_tokens": 1200, "output_tokens": 8}}
]}
EOF
}

# In acceptEdits Claude Code runs read-only commands (ls, cat, …) and
# file-system ones (touch, mkdir, …) without a rule, so the denial needs a
# command of another kind.
claude_command_then_text() {
  cat <<EOF
{"turns": [
  {"run_command": {"command": "$1"},
   "usage": {"input_tokens": 1200, "cached_input_tokens": 0, "output_tokens": 25}},
  {"text": {"text": "Finished."},
   "usage": {"input_tokens": 80, "cached_input_tokens": 1200, "output_tokens": 8}}
]}
EOF
}

CLAUDE_P=(claude -p "Create hello.txt containing a greeting." --output-format stream-json --verbose)
CLAUDE_QUIET=(--env CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1)

capture_claude() {
  claude_write_then_text | capture claude default-write-denied "${CLAUDE_QUIET[@]}" -- "${CLAUDE_P[@]}"

  claude_write_then_text | capture claude accept-edits-write "${CLAUDE_QUIET[@]}" -- \
    "${CLAUDE_P[@]}" --permission-mode acceptEdits

  claude_command_then_text "ls -la" | capture claude accept-edits-bash-ls "${CLAUDE_QUIET[@]}" -- \
    claude -p "List the files." --output-format stream-json --verbose --permission-mode acceptEdits

  claude_command_then_text "ls -la" | capture claude accept-edits-bash-ls-allowed "${CLAUDE_QUIET[@]}" -- \
    claude -p "List the files." --output-format stream-json --verbose --permission-mode acceptEdits \
    --allowedTools "Bash(ls:*)"

  claude_command_then_text "python3 -c 'print(42)'" |
    capture claude accept-edits-bash-denied "${CLAUDE_QUIET[@]}" -- \
      claude -p "Run a script." --output-format stream-json --verbose --permission-mode acceptEdits

  claude_command_then_text "python3 -c 'print(42)'" |
    capture claude accept-edits-bash-allowed "${CLAUDE_QUIET[@]}" -- \
      claude -p "Run a script." --output-format stream-json --verbose --permission-mode acceptEdits \
      --allowedTools "Bash(python3:*)"

  claude_write_then_text | capture claude disallowed-write "${CLAUDE_QUIET[@]}" -- \
    "${CLAUDE_P[@]}" --permission-mode acceptEdits --disallowedTools Write

  claude_write_then_text | capture claude plan-mode "${CLAUDE_QUIET[@]}" -- \
    "${CLAUDE_P[@]}" --permission-mode plan

  claude_write_then_text | capture claude bypass-permissions-root "${CLAUDE_QUIET[@]}" -- \
    "${CLAUDE_P[@]}" --permission-mode bypassPermissions

  claude_write_then_text | capture claude skip-permissions-root "${CLAUDE_QUIET[@]}" -- \
    "${CLAUDE_P[@]}" --dangerously-skip-permissions

  claude_write_then_text | capture claude skip-permissions-root-is-sandbox "${CLAUDE_QUIET[@]}" \
    --env IS_SANDBOX=1 -- "${CLAUDE_P[@]}" --dangerously-skip-permissions

  # Three failures: the first request and CLAUDE_CODE_MAX_RETRIES=2 retries.
  capture claude api-error-500 "${CLAUDE_QUIET[@]}" --env CLAUDE_CODE_MAX_RETRIES=2 -- \
    "${CLAUDE_P[@]}" --permission-mode acceptEdits <<'EOF'
{"turns": [{"error": {"status": 500, "times": 3}}]}
EOF

  # One retry that succeeds: api_retry lines followed by a normal run.
  capture claude api-error-529-recovers "${CLAUDE_QUIET[@]}" --env CLAUDE_CODE_MAX_RETRIES=2 -- \
    claude -p "Say hi." --output-format stream-json --verbose <<'EOF'
{"turns": [
  {"error": {"status": 529, "times": 1}},
  {"text": {"text": "Hi."}, "usage": {"input_tokens": 900, "cached_input_tokens": 0, "output_tokens": 3}}
]}
EOF

  # Side requests left on (no CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC) and
  # sent to a second model, so modelUsage shows both.
  capture claude two-step-usage --env ANTHROPIC_DEFAULT_HAIKU_MODEL=claude-haiku-4-5 -- \
    "${CLAUDE_P[@]}" --permission-mode acceptEdits --model claude-sonnet-4-5 <<'EOF'
{"turns": [
  {"write_file": {"path": "hello.txt", "content": "hello from pam\n"},
   "preamble": "I'll create hello.txt.",
   "usage": {"input_tokens": 1500, "cached_input_tokens": 300, "output_tokens": 45}},
  {"text": {"text": "Created hello.txt."},
   "usage": {"input_tokens": 70, "cached_input_tokens": 1800, "output_tokens": 9}}
],
 "side_reply": {"text": "Create greeting file", "usage": {"input_tokens": 120, "cached_input_tokens": 0, "output_tokens": 6}}}
EOF

  # The raw API events as stream_event lines, to compare their usage with
  # the assistant lines'.
  capture claude two-step-partial-messages "${CLAUDE_QUIET[@]}" -- \
    "${CLAUDE_P[@]}" --permission-mode acceptEdits --include-partial-messages <<'EOF'
{"turns": [
  {"write_file": {"path": "hello.txt", "content": "hello from pam\n"},
   "preamble": "I'll create hello.txt.",
   "usage": {"input_tokens": 1500, "cached_input_tokens": 300, "output_tokens": 45}},
  {"text": {"text": "Created hello.txt."},
   "usage": {"input_tokens": 70, "cached_input_tokens": 1800, "output_tokens": 9}}
]}
EOF

  local sid
  sid=$(session_id claude two-step-usage)
  capture claude resume --reuse two-step-usage --env ANTHROPIC_DEFAULT_HAIKU_MODEL=claude-haiku-4-5 -- \
    claude -p "What did you just do?" --output-format stream-json --verbose \
    --permission-mode acceptEdits --model claude-sonnet-4-5 --resume "$sid" <<'EOF'
{"turns": [
  {"text": {"text": "I created hello.txt."},
   "usage": {"input_tokens": 40, "cached_input_tokens": 1900, "output_tokens": 7}}
]}
EOF
}
