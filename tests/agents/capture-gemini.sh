# Gemini CLI scenarios for capture.sh. Sourced, not run.

gemini_script() {
  # $1: the tool turns, each a JSON object followed by a comma.
  cat <<EOF
{"turns": [
  $1
  {"text": {"text": "Finished."},
   "usage": {"input_tokens": 90, "cached_input_tokens": 1200, "output_tokens": 8}}
]}
EOF
}

GEMINI_WRITE='{"write_file": {"path": "hello.txt", "content": "hello from pam\n"},
   "usage": {"input_tokens": 1200, "cached_input_tokens": 0, "output_tokens": 40}},'
gemini_cmd() {
  printf '{"run_command": {"command": "%s"}, "usage": {"input_tokens": 300, "cached_input_tokens": 900, "output_tokens": 20}},' "$1"
}

GEMINI_P=(gemini --output-format stream-json)
GEMINI_PROMPT="Create hello.txt containing a greeting."

capture_gemini() {
  local mode
  for mode in default auto_edit plan; do
    gemini_script "$GEMINI_WRITE" | capture gemini "$mode-write" -- \
      "${GEMINI_P[@]}" --approval-mode "$mode" -p "$GEMINI_PROMPT"
    gemini_script "$(gemini_cmd 'touch made-by-shell.txt')" | capture gemini "$mode-shell" -- \
      "${GEMINI_P[@]}" --approval-mode "$mode" -p "Touch a file."
  done

  gemini_script "$GEMINI_WRITE $(gemini_cmd 'cat hello.txt && touch made-by-shell.txt')" |
    capture gemini yolo-write-and-shell -- "${GEMINI_P[@]}" --approval-mode yolo -p "$GEMINI_PROMPT"

  gemini_script "$(gemini_cmd 'touch made-by-shell.txt')" | capture gemini allowed-tools-shell -- \
    "${GEMINI_P[@]}" --approval-mode auto_edit --allowed-tools "run_shell_command(touch)" -p "Touch a file."

  # A command the allow list does not match: denied by the policy engine.
  gemini_script "$(gemini_cmd "python3 -c 'print(42)'")" | capture gemini allowed-tools-shell-denied -- \
    "${GEMINI_P[@]}" --approval-mode auto_edit --allowed-tools "run_shell_command(touch)" -p "Run a script."

  gemini_script "$GEMINI_WRITE" | capture gemini no-git-repo --no-git -- \
    "${GEMINI_P[@]}" --approval-mode auto_edit -p "$GEMINI_PROMPT"

  # general.maxAttempts = 2 in settings.json: one retry, 5 s apart or so.
  capture gemini api-error-500 -- "${GEMINI_P[@]}" -p "Say hi." <<'EOF'
{"turns": [{"error": {"status": 500, "times": 4}}]}
EOF
  capture gemini api-error-400 -- "${GEMINI_P[@]}" -p "Say hi." <<'EOF'
{"turns": [{"error": {"status": 400, "times": 1}}]}
EOF

  capture gemini two-step-usage -- \
    "${GEMINI_P[@]}" --approval-mode auto_edit -p "$GEMINI_PROMPT" <<'EOF'
{"turns": [
  {"write_file": {"path": "hello.txt", "content": "hello from pam\n"},
   "preamble": "I'll create hello.txt.",
   "usage": {"input_tokens": 1500, "cached_input_tokens": 300, "output_tokens": 45}},
  {"text": {"text": "Created hello.txt."},
   "usage": {"input_tokens": 70, "cached_input_tokens": 1800, "output_tokens": 9}}
],
 "side_reply": {"text": "simple", "usage": {"input_tokens": 120, "cached_input_tokens": 0, "output_tokens": 6}}}
EOF

  local sid
  sid=$(session_id gemini two-step-usage)
  capture gemini resume --reuse two-step-usage -- \
    "${GEMINI_P[@]}" --approval-mode auto_edit --resume "$sid" -p "What did you just do?" <<'EOF'
{"turns": [
  {"text": {"text": "I created hello.txt."},
   "usage": {"input_tokens": 40, "cached_input_tokens": 1900, "output_tokens": 7}}
]}
EOF
  capture gemini resume-latest --reuse two-step-usage -- \
    "${GEMINI_P[@]}" --approval-mode auto_edit --resume latest -p "And before that?" <<'EOF'
{"turns": [
  {"text": {"text": "Nothing else."},
   "usage": {"input_tokens": 30, "cached_input_tokens": 2000, "output_tokens": 4}}
]}
EOF
}
