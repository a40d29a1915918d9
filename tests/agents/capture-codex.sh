# Codex CLI scenarios for capture.sh. Sourced, not run.

codex_script() {
  # $1: the tool turns, each a JSON object followed by a comma.
  cat <<EOF
{"turns": [
  $1
  {"text": {"text": "Finished."},
   "usage": {"input_tokens": 90, "cached_input_tokens": 1200, "output_tokens": 8}}
]}
EOF
}

CODEX_WRITE='{"write_file": {"path": "hello.txt", "content": "hello from pam\n"},
   "usage": {"input_tokens": 1200, "cached_input_tokens": 0, "output_tokens": 40}},'
codex_cmd() {
  printf '{"run_command": {"command": "%s"}, "usage": {"input_tokens": 300, "cached_input_tokens": 900, "output_tokens": 20}},' "$1"
}

CODEX_EXEC=(codex exec --json)
CODEX_PROMPT="Create hello.txt containing a greeting."

capture_codex() {
  codex_script "$CODEX_WRITE" | capture codex read-only-write -- \
    "${CODEX_EXEC[@]}" --sandbox read-only "$CODEX_PROMPT"

  codex_script "$(codex_cmd 'touch made-by-shell.txt')" | capture codex read-only-command -- \
    "${CODEX_EXEC[@]}" --sandbox read-only "Touch a file."

  codex_script "$CODEX_WRITE $(codex_cmd 'cat hello.txt && touch made-by-shell.txt && ls')" |
    capture codex workspace-write -- "${CODEX_EXEC[@]}" --sandbox workspace-write "$CODEX_PROMPT"

  # Whether the sandbox really confines writes to the working directory.
  codex_script "$(codex_cmd 'touch /var/tmp/pam-codex-outside.txt')" |
    capture codex workspace-write-outside -- "${CODEX_EXEC[@]}" --sandbox workspace-write "Touch a file."
  rm -f /var/tmp/pam-codex-outside.txt

  codex_script "$CODEX_WRITE $(codex_cmd 'cat hello.txt && touch made-by-shell.txt')" |
    capture codex danger-full-access -- "${CODEX_EXEC[@]}" --sandbox danger-full-access "$CODEX_PROMPT"

  codex_script "$CODEX_WRITE $(codex_cmd 'touch /var/tmp/pam-codex-outside.txt')" |
    capture codex bypass-approvals-and-sandbox -- \
      "${CODEX_EXEC[@]}" --dangerously-bypass-approvals-and-sandbox "$CODEX_PROMPT"
  rm -f /var/tmp/pam-codex-outside.txt

  # on-request: with no human to ask, how does exec treat an escalation?
  codex_script "$CODEX_WRITE" | capture codex approval-on-request-read-only -- \
    "${CODEX_EXEC[@]}" --sandbox read-only -c 'approval_policy="on-request"' "$CODEX_PROMPT"

  codex_script "" | capture codex no-git-repo --no-git -- "${CODEX_EXEC[@]}" "Say hi."
  codex_script "" | capture codex no-git-repo-skip-check --no-git -- \
    "${CODEX_EXEC[@]}" --skip-git-repo-check "Say hi."

  # request_max_retries = 1: the first request and one retry both fail.
  capture codex api-error-500 -- "${CODEX_EXEC[@]}" "Say hi." <<'EOF'
{"turns": [{"error": {"status": 500, "times": 4}}]}
EOF
  capture codex api-error-500-recovers -- "${CODEX_EXEC[@]}" "Say hi." <<'EOF'
{"turns": [
  {"error": {"status": 500, "times": 1}},
  {"text": {"text": "Hi."}, "usage": {"input_tokens": 900, "cached_input_tokens": 0, "output_tokens": 3}}
]}
EOF
  capture codex api-error-400 -- "${CODEX_EXEC[@]}" "Say hi." <<'EOF'
{"turns": [{"error": {"status": 400, "times": 1}}]}
EOF

  capture codex api-error-429 -- "${CODEX_EXEC[@]}" "Say hi." <<'EOF'
{"turns": [{"error": {"status": 429, "times": 4}}]}
EOF

  # A model codex has no metadata for: the warning is an item of type error.
  codex_script "" | capture codex unknown-model-warning -- "${CODEX_EXEC[@]}" -m gpt-5-codex "Say hi."

  capture codex two-step-usage -- \
    "${CODEX_EXEC[@]}" --sandbox workspace-write "$CODEX_PROMPT" <<'EOF'
{"turns": [
  {"write_file": {"path": "hello.txt", "content": "hello from pam\n"},
   "preamble": "I'll create hello.txt.",
   "usage": {"input_tokens": 1500, "cached_input_tokens": 300, "output_tokens": 45}},
  {"text": {"text": "Created hello.txt."},
   "usage": {"input_tokens": 70, "cached_input_tokens": 1800, "output_tokens": 9}}
]}
EOF

  local tid
  tid=$(session_id codex two-step-usage)
  capture codex resume --reuse two-step-usage -- \
    codex exec resume --json -c 'sandbox_mode="workspace-write"' "$tid" "What did you just do?" <<'EOF'
{"turns": [
  {"text": {"text": "I created hello.txt."},
   "usage": {"input_tokens": 40, "cached_input_tokens": 1900, "output_tokens": 7}}
]}
EOF
}
