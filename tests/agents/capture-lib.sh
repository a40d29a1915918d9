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

# capture CLI SCENARIO [--no-git] [--reuse SCENARIO] [--env NAME=VALUE]...
#         [--session] [--during N [--after MS] [--stop]] -- ARGV...
# Reads the script JSON from stdin.
#
# --session also keeps the CLI's own session file (codex rollout, gemini
# chat) as <scenario>.rollout.jsonl / <scenario>.chat.jsonl. --during N
# (implies --session; the script's turn N must be held) copies that file
# as <scenario>.{rollout,chat}-during.jsonl once the server holds the N-th
# turn request, then releases it, or with --stop sends the CLI a SIGTERM
# instead, as pam stops a run.
capture() {
  local cli=$1 scenario=$2
  shift 2
  local git=1 reuse="" extra_env=() session=0 during="" stop=0 after=""
  while [ $# -gt 0 ]; do
    case $1 in
    --no-git) git=0 ;;
    --reuse) reuse=$2; shift ;;
    --env) extra_env+=("$2"); shift ;;
    --session) session=1 ;;
    --during) during=$2; session=1; shift ;;
    --stop) stop=1 ;;
    --after) after=$2; shift ;;
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
  (cd "$repo" && exec env -i "${envs[@]}" timeout "${CAPTURE_TIMEOUT:-300}" "${argv[@]}" \
    </dev/null >"$stdout" 2>"$stderr") &
  local cli_pid=$! during_note=""
  if [ -n "$during" ]; then
    during_note=$(live_step "$cli" "$home" "$stdout" "$scenario" "$during" "$stop" "$cli_pid" "$after")
  fi
  wait "$cli_pid"
  local rc=$?
  end=$(date +%s.%N)
  sleep 0.3
  stop_server
  [ -s "$stderr" ] || rm -f "$stderr"
  local session_note=""
  [ "$session" = 1 ] && session_note=$(copy_session "$cli" "$home" "$stdout" "$OUT/$cli/$scenario")

  {
    printf '# exit status %s; run in %s (a git repository: %s)\n' "$rc" "$repo" \
      "$([ "$git" = 1 ] && echo yes || echo no)"
    printf 'argv:'
    printf ' %q' "$(basename "${argv[0]}")" "${argv[@]:1}"
    printf '\nenv:'
    local e
    for e in "${envs[@]}"; do printf ' %s' "${e%%=*}"; done
    printf '\n'
    [ -z "$during_note" ] || printf '%s\n' "$during_note"
    [ -z "$session_note" ] || printf '%s\n' "$session_note"
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

# The session files of the run whose stdout is $3, under HOME $2, the
# most recently written first: codex finds its rollout by the thread id,
# gemini its chats by the first 8 characters of the session id (the file
# name) and the full id (their first line). A resumed gemini session has
# two: the one it goes on appending to, and one started afresh (only the
# session context) before the resume took over.
session_files() {
  local cli=$1 home=$2 stdout=$3 id
  id=$(grep -o -m1 '"\(session_id\|thread_id\)":"[^"]*"' "$stdout" | sed 's/.*:"\(.*\)"/\1/')
  [ -n "$id" ] || return 1
  case $cli in
  codex) find "$home/.codex/sessions" -name "rollout-*-$id.jsonl" 2>/dev/null | head -n1 ;;
  gemini)
    local f
    # shellcheck disable=SC2012 # names are ours: no newlines
    ls -t "$home"/.gemini/tmp/*/chats/session-*-"${id:0:8}".jsonl 2>/dev/null |
      while read -r f; do
        head -n1 "$f" | grep -q "\"sessionId\":\"$id\"" && echo "$f"
      done
    ;;
  esac
}

session_kind() {
  case $1 in codex) echo rollout ;; gemini) echo chat ;; *) echo session ;; esac
}

# Copies the session file to $4.<kind>$5.jsonl (any further one, older,
# to $4.<kind>$5.other<N>.jsonl); prints lines for the .cmd.
copy_session() {
  local cli=$1 home=$2 stdout=$3 dest=$4 suffix=${5:-} kind file files n=0 name
  kind=$(session_kind "$cli")
  mapfile -t files < <(session_files "$cli" "$home" "$stdout")
  if [ ${#files[@]} = 0 ]; then
    echo "# no $kind file found$suffix"
    return 0
  fi
  for file in "${files[@]}"; do
    name="$(basename "$dest").$kind$suffix.jsonl"
    [ $n = 0 ] || name="$(basename "$dest").$kind$suffix.other$n.jsonl"
    cp "$file" "$(dirname "$dest")/$name"
    printf '# %s%s: $HOME/%s (%s bytes, %s lines) -> %s\n' "$kind" "$suffix" "${file#"$home"/}" \
      "$(wc -c <"$file")" "$(wc -l <"$file")" "$name"
    n=$((n + 1))
  done
}

# While the CLI (pid $7) waits on the held turn request $5: copies its
# session file, then releases the request or, with $6 = 1, stops the CLI.
# With $8 (ms) the request need not be held: the copy is taken that long
# after it arrived.
live_step() {
  local cli=$1 home=$2 stdout=$3 scenario=$4 n=$5 stop=$6 pid=$7 after=${8:-}
  local code until="turn_requests=$n&held=1" when="turn request $n held, the CLI waiting on it"
  if [ -n "$after" ]; then
    until="turn_requests=$n"
    when="${after} ms after turn request $n arrived"
  fi
  code=$(curl -s -o /dev/null -w '%{http_code}' \
    "$BASE_URL/_pam/wait?$until&timeout_ms=${CAPTURE_WAIT_MS:-60000}")
  if [ "$code" != 200 ]; then
    echo "# turn request $n never came (wait: HTTP $code)"
    return 0
  fi
  [ -z "$after" ] || sleep "$(awk "BEGIN{print $after / 1000}")"
  copy_session "$cli" "$home" "$stdout" "$OUT/$cli/$scenario" -during |
    sed "s/^# \([a-z]*\)-during:/# \1-during ($when):/"
  if [ "$stop" = 1 ]; then
    # timeout(1) passes the TERM on to the CLI.
    kill -TERM "$pid"
    echo "# then SIGTERM to the CLI"
  elif [ -z "$after" ]; then
    curl -s -o /dev/null -X POST "$BASE_URL/_pam/release"
    echo "# then turn request $n released"
  fi
}
