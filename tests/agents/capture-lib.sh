# Shared by capture.sh: runs one agent CLI headless against
# pam-model-server and stores what it printed. Sourced, not run.
#
# Each scenario gets a fixed directory $WORK/<cli>-<scenario>/ holding
# home/ (the CLI's HOME), repo/ (its working directory), script.json and
# requests.jsonl (what the server saw). Fixed paths keep the captures
# stable from one run to the next.

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
BIN="$HERE/node_modules/.bin"
SERVER=${PAM_MODEL_SERVER:-${CARGO_TARGET_DIR:-$ROOT/target}/debug/pam-model-server}
OUT=${CAPTURE_OUT:-$ROOT/worker/src/providers/captures}
WORK=${CAPTURE_WORK:-/tmp/pam-capture}
TIMINGS="$WORK/timings.tsv"
# Fake keys: the server ignores them, the CLIs refuse to start without one.
FAKE_KEY=sk-pam-model-server

mkdir -p "$WORK"

# Starts the server for $dir/script.json; sets SERVER_PID and BASE_URL.
start_server() {
  local dir=$1
  : >"$dir/requests.jsonl"
  "$SERVER" --listen 127.0.0.1:0 --script "$dir/script.json" --log "$dir/requests.jsonl" \
    >"$dir/server.out" 2>"$dir/server.err" &
  SERVER_PID=$!
  for _ in $(seq 100); do
    BASE_URL=$(head -n1 "$dir/server.out" 2>/dev/null)
    [ -n "$BASE_URL" ] && return 0
    sleep 0.05
  done
  echo "pam-model-server did not start: $(cat "$dir/server.err")" >&2
  return 1
}

stop_server() {
  kill "$SERVER_PID" 2>/dev/null
  wait "$SERVER_PID" 2>/dev/null
}

# Writes the per-CLI configuration that points it at BASE_URL.
configure_home() {
  local cli=$1 home=$2
  case $cli in
  codex)
    mkdir -p "$home/.codex"
    cat >"$home/.codex/config.toml" <<EOF
model = "gpt-5.5"
model_provider = "pam"
# Offline: no release check (api.github.com), no curated-plugin sync
# (github.com, chatgpt.com), no analytics (ab.chatgpt.com).
check_for_update_on_startup = false
${CODEX_EXTRA_CONFIG:-}

[analytics]
enabled = false

[features]
plugins = false

[model_providers.pam]
name = "pam model server"
base_url = "$BASE_URL/v1"
env_key = "PAM_MODEL_API_KEY"
wire_api = "responses"
request_max_retries = ${CODEX_RETRIES:-1}
stream_max_retries = ${CODEX_RETRIES:-1}
EOF
    ;;
  gemini)
    mkdir -p "$home/.gemini"
    cat >"$home/.gemini/settings.json" <<EOF
{
  "security": { "auth": { "selectedType": "gemini-api-key" } },
  "privacy": { "usageStatisticsEnabled": false },
  "telemetry": { "enabled": false },
  "general": {
    "enableAutoUpdate": false,
    "enableAutoUpdateNotification": false,
    "maxAttempts": ${GEMINI_MAX_ATTEMPTS:-2}
  }
}
EOF
    ;;
  esac
}

# The variables each CLI needs to reach the server offline.
cli_env() {
  local cli=$1
  case $cli in
  claude)
    echo "ANTHROPIC_BASE_URL=$BASE_URL"
    echo "ANTHROPIC_API_KEY=$FAKE_KEY"
    echo "DISABLE_TELEMETRY=1"
    echo "DISABLE_ERROR_REPORTING=1"
    echo "DISABLE_AUTOUPDATER=1"
    ;;
  codex)
    echo "PAM_MODEL_API_KEY=$FAKE_KEY"
    ;;
  gemini)
    echo "GEMINI_API_KEY=$FAKE_KEY"
    echo "GOOGLE_GEMINI_BASE_URL=$BASE_URL"
    echo "GEMINI_CLI_TRUST_WORKSPACE=true"
    ;;
  esac
}

# capture CLI SCENARIO [--no-git] [--reuse SCENARIO] [--env NAME=VALUE]... -- ARGV...
# Reads the script JSON from stdin.
capture() {
  local cli=$1 scenario=$2
  shift 2
  local git=1 reuse="" extra_env=()
  while [ $# -gt 0 ]; do
    case $1 in
    --no-git) git=0 ;;
    --reuse) reuse=$2; shift ;;
    --env) extra_env+=("$2"); shift ;;
    --) shift; break ;;
    esac
    shift
  done
  local dir="$WORK/$cli-$scenario"
  local home="$dir/home" repo="$dir/repo"
  rm -rf "$dir"
  mkdir -p "$dir"
  cat >"$dir/script.json"
  if [ -n "$reuse" ]; then
    # A resumed session needs the HOME and the directory it was started in.
    home="$WORK/$cli-$reuse/home"
    repo="$WORK/$cli-$reuse/repo"
  else
    mkdir -p "$home" "$repo"
    if [ "$git" = 1 ]; then
      git -C "$repo" init -q
      git -C "$repo" -c user.name=pam -c user.email=pam@example.invalid \
        commit -q --allow-empty -m "empty"
    fi
  fi
  start_server "$dir" || return 1
  configure_home "$cli" "$home"

  local envs=("HOME=$home" "PATH=/usr/local/bin:/usr/bin:/bin" "LANG=C.UTF-8" "TERM=dumb")
  mapfile -t -O "${#envs[@]}" envs < <(cli_env "$cli")
  envs+=("${extra_env[@]}")

  local argv=("$@")
  argv[0]="$BIN/${argv[0]}"
  mkdir -p "$OUT/$cli"
  local stdout="$OUT/$cli/$scenario.jsonl" stderr="$OUT/$cli/$scenario.stderr"
  local start end
  start=$(date +%s.%N)
  (cd "$repo" && env -i "${envs[@]}" timeout "${CAPTURE_TIMEOUT:-300}" "${argv[@]}" \
    </dev/null >"$stdout" 2>"$stderr")
  local rc=$?
  end=$(date +%s.%N)
  sleep 0.3
  stop_server
  [ -s "$stderr" ] || rm -f "$stderr"

  {
    printf '# exit status %s; run in %s (a git repository: %s)\n' "$rc" "$repo" \
      "$([ "$git" = 1 ] && echo yes || echo no)"
    printf 'argv:'
    printf ' %q' "$(basename "${argv[0]}")" "${argv[@]:1}"
    printf '\nenv:'
    local e
    for e in "${envs[@]}"; do printf ' %s' "${e%%=*}"; done
    printf '\n'
  } >"$OUT/$cli/$scenario.cmd"
  printf '%s\t%s\t%s\t%.2f\n' "$cli" "$scenario" "$rc" "$(awk "BEGIN{print $end - $start}")" >>"$TIMINGS"
  echo "$cli/$scenario: exit $rc, $(wc -l <"$stdout") lines, $(grep -c . "$dir/requests.jsonl") requests"
}

# The first session/thread id printed in a capture.
session_id() {
  local cli=$1 scenario=$2
  grep -o -m1 '"\(session_id\|thread_id\)":"[^"]*"' "$OUT/$cli/$scenario.jsonl" |
    head -n1 | sed 's/.*:"\(.*\)"/\1/'
}
