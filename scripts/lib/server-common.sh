# Shared by scripts/{llama,vllm,sglang}-server.sh: logging with the failing
# step named, the pidfile and log of a started server, stopping it with its
# whole process group, status, and the command dispatch. Sourced, not run.
#
# The sourcing script sets, before calling anything here:
#   SCRIPT_NAME   e.g. vllm-server.sh (prefix of every log line)
#   SERVER_KIND   e.g. vllm-server (pidfile/log names: run/<kind>-<port>.{pid,log})
#   SERVER_LABEL  e.g. "vLLM server" (in messages)
#   USAGE_LINES   the header comment lines that make up --help, e.g. 2,13
#   RUN_DIR, PORT
# and defines is_our_server PID, cmd_build, cmd_model, cmd_start, cmd_path.

STEP="setup"
log() { printf '%s: %s\n' "$SCRIPT_NAME" "$*" >&2; }
die() { log "step '$STEP' failed: $*"; exit 1; }
on_err() {
  local rc=$?
  log "step '$STEP' failed (exit $rc, line ${BASH_LINENO[0]})"
  exit "$rc"
}
trap on_err ERR

have() { command -v "$1" >/dev/null 2>&1; }
sha256_of() { sha256sum "$1" | cut -d' ' -f1; }
http_code() { curl -s -o /dev/null -w '%{http_code}' --max-time 2 "$1" 2>/dev/null || true; }

# The installer of the engines' Python packages: uv, a pinned release from
# PyPI in a small venv of its own under the cache. It fetches and unpacks in
# parallel: on a cold 2-core machine it put the vLLM venv together in about
# 2 minutes where pip took 9, which was most of what a cold CI run waited for.
# Bytecode is compiled at install time (on all cores) as pip did: where
# PYTHONDONTWRITEBYTECODE is set (CI machines have it) nothing would ever
# cache it, and each engine process would compile vLLM's sources anew at
# every start (45 s instead of 30 s for the import alone).
# Needs CACHE_DIR, PYTHON and NICE; sets UV.
UV_VERSION="0.13.9"
ensure_uv() {
  local dir="$CACHE_DIR/tools/uv-$UV_VERSION"
  UV="$dir/bin/uv"
  if [[ -x "$UV" ]] && "$UV" --version >/dev/null 2>&1; then
    return 0
  fi
  # made aside and moved in whole: two builds at once never see half of it
  local tmp="$dir.tmp.$$"
  rm -rf "$tmp"
  mkdir -p "$(dirname "$dir")"
  "$PYTHON" -m venv "$tmp" >&2 || die "could not create a venv for uv with $PYTHON"
  "$tmp/bin/pip" install --quiet --disable-pip-version-check --no-input "uv==$UV_VERSION" >&2 \
    || { rm -rf "$tmp"; die "pip install uv==$UV_VERSION failed"; }
  # uv is one native binary, so the venv works moved; another build that
  # got there first wins and this copy goes
  mv -T "$tmp" "$dir" 2>/dev/null || rm -rf "$tmp"
  "$UV" --version >/dev/null 2>&1 || die "uv==$UV_VERSION does not run from $dir"
}

# venv_install VPY ARGS...: `uv pip install ARGS` into the venv of VPY, at
# nice $NICE. A machine whose pip trusts a CA file of its own (PIP_CERT)
# gives it to uv too.
venv_install() {
  local vpy="$1"
  shift
  ensure_uv
  local cert=()
  if [[ -n "${PIP_CERT:-}" && -z "${SSL_CERT_FILE:-}" ]]; then
    cert=(env "SSL_CERT_FILE=$PIP_CERT")
  fi
  nice -n "$NICE" "${cert[@]}" "$UV" pip install --quiet --compile-bytecode --python "$vpy" "$@"
}

pidfile() { echo "$RUN_DIR/$SERVER_KIND-$PORT.pid"; }
logfile() { echo "$RUN_DIR/$SERVER_KIND-$PORT.log"; }

# Is anything of the server started as $1 still there? Servers are started
# with setsid, so $1 also names their process group, which holds the worker
# processes an engine forks (and which may outlive the main process).
group_alive() { kill -0 -- "-$1" 2>/dev/null || kill -0 "$1" 2>/dev/null; }

# TERM the server's process group, then KILL it if it is still there after 30 s.
stop_pid() {
  local pid="$1" i
  kill -TERM -- "-$pid" 2>/dev/null || kill -TERM "$pid" 2>/dev/null || true
  for ((i = 0; i < 150; i++)); do
    group_alive "$pid" || return 0
    sleep 0.2
  done
  log "process group $pid ignored SIGTERM for 30 s; sending SIGKILL"
  kill -KILL -- "-$pid" 2>/dev/null || kill -KILL "$pid" 2>/dev/null || true
  for ((i = 0; i < 50; i++)); do
    group_alive "$pid" || return 0
    sleep 0.2
  done
  return 1
}

parse_port_only() {
  while (($#)); do
    case "$1" in
      --port) PORT="$2"; shift 2 ;;
      *) die "unknown option $1" ;;
    esac
  done
}

cmd_stop() {
  STEP="stop"
  parse_port_only "$@"
  local pf pid
  pf="$(pidfile)"
  if [[ ! -f "$pf" ]]; then
    log "no pidfile for port $PORT ($pf); nothing to stop"
    return 0
  fi
  pid="$(cat "$pf")"
  if ! is_our_server "$pid"; then
    log "pid $pid from $pf is not a running $SERVER_LABEL; removing the pidfile"
    # the processes it forked may outlive it in the same process group
    [[ -n "$pid" ]] && kill -0 -- "-$pid" 2>/dev/null && { stop_pid "$pid" || true; }
    rm -f "$pf"
    return 0
  fi
  stop_pid "$pid" || die "process group $pid is still alive"
  rm -f "$pf"
  log "stopped pid $pid"
}

cmd_status() {
  STEP="status"
  parse_port_only "$@"
  local pf
  pf="$(pidfile)"
  if [[ -f "$pf" ]] && is_our_server "$(cat "$pf")"; then
    echo "running pid $(cat "$pf") http://127.0.0.1:$PORT health=$(http_code "http://127.0.0.1:$PORT/health")"
  else
    echo "not running"
    trap - ERR
    exit 1
  fi
}

usage() { sed -n "${USAGE_LINES}p" "$0" | sed 's/^# \{0,1\}//' >&2; }

dispatch() {
  local cmd="${1:-}"
  (($#)) && shift
  case "$cmd" in
    build) cmd_build "$@" ;;
    model) cmd_model "$@" ;;
    start) cmd_start "$@" ;;
    stop) cmd_stop "$@" ;;
    status) cmd_status "$@" ;;
    path) cmd_path "$@" ;;
    -h | --help | help) usage ;;
    *) usage; exit 2 ;;
  esac
}
