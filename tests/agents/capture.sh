#!/usr/bin/env bash
# Captures the real agent CLIs' headless output against pam-model-server
# into worker/src/providers/captures/<cli>/<scenario>.{jsonl,stderr,cmd}.
#
#   cargo build -p pam-model-server
#   (cd tests/agents && npm ci --no-audit --no-fund)
#   tests/agents/capture.sh [claude|codex|gemini|sessions]...
#
# "sessions" also keeps codex's rollout and gemini's chat file, during a
# run (a held turn) and after it (capture-sessions.sh).
#
# Scenario timings go to $CAPTURE_WORK/timings.tsv (default
# /tmp/pam-capture), and each scenario's requests to
# $CAPTURE_WORK/<cli>-<scenario>/requests.jsonl.
set -uo pipefail
source "$(dirname "$0")/capture-lib.sh"
source "$(dirname "$0")/capture-claude.sh"
source "$(dirname "$0")/capture-codex.sh"
source "$(dirname "$0")/capture-gemini.sh"
source "$(dirname "$0")/capture-sessions.sh"

[ -x "$SERVER" ] || {
  echo "no $SERVER: build it with cargo build -p pam-model-server" >&2
  exit 1
}

targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(claude codex gemini sessions)
for target in "${targets[@]}"; do
  "capture_$target"
done
