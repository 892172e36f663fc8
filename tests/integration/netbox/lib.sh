# shellcheck shell=bash
# Shared by up.sh, down.sh, reset.sh and regenerate-dump.sh. Source it; do not run it.
#
# Everything NetBox writes lives under $NETBOX_HOME (outside the repository):
#   venv/                    the NetBox virtualenv (netbox==4.7.3 on Python 3.12)
#   root/                    NETBOX_ROOT: conf/configuration.py, media/, scripts/, reports/
#   env                      the file tests source: NETBOX_URL, NETBOX_TOKEN, object ids
#   gunicorn.pid/.log        the server
#   redis.pid/.log           redis, when these scripts started it
#   started-postgresql       marker: up.sh started the PostgreSQL cluster (down.sh stops it)
#   db.sha256                sha256 of the dump the database was restored from

NB_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
NETBOX_VERSION=4.7.3
NETBOX_HOME="${NETBOX_HOME:-/var/tmp/machine-agent-netbox}"
NETBOX_VENV="$NETBOX_HOME/venv"
NETBOX_ROOT="$NETBOX_HOME/root"
NETBOX_ENV_FILE="$NETBOX_HOME/env"
NETBOX_PORT="${NETBOX_PORT:-8001}"
NETBOX_URL="http://127.0.0.1:$NETBOX_PORT"
NETBOX_DB_NAME="${NETBOX_DB_NAME:-netbox}"
NETBOX_DB_USER="${NETBOX_DB_USER:-netbox}"
# Loopback-only throwaway instance: fixed credentials are fine and keep runs reproducible.
NETBOX_DB_PASSWORD="${NETBOX_DB_PASSWORD:-machine-agent-test-db}"
REDIS_PORT="${REDIS_PORT:-6379}"
NETBOX_DUMP="$NB_DIR/netbox.sql.gz"
GUNICORN_PID="$NETBOX_HOME/gunicorn.pid"
GUNICORN_LOG="$NETBOX_HOME/gunicorn.log"
APT_PACKAGES=(postgresql redis-server libpq-dev gcc)

export NETBOX_ROOT NETBOX_DB_NAME
mkdir -p "$NETBOX_HOME"

_nb_t0=$(date +%s.%N)
_nb_step_t0=$_nb_t0
_nb_step_name=""
NB_TAG="${NB_TAG:-netbox}"
# shellcheck source=../../../.ci/progress.sh
source "$(dirname "${BASH_SOURCE[0]}")/../../../.ci/progress.sh"

_nb_elapsed() { awk -v a="$1" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }'; }

# step NAME: start a timed step (ends the previous one).
step() {
  step_done
  _nb_step_name="$1"
  _nb_step_t0=$(date +%s.%N)
}
# step_done [NOTE]: end the current step, printing one line with its time.
step_done() {
  if [[ -n "$_nb_step_name" ]]; then
    printf '[%s] %-34s %6ss  %s\n' "$NB_TAG" "$_nb_step_name" "$(_nb_elapsed "$_nb_step_t0")" "${1:-ok}"
    _nb_step_name=""
  fi
}
total_done() {
  step_done
  printf '[%s] %-34s %6ss\n' "$NB_TAG" "total" "$(_nb_elapsed "$_nb_t0")"
}
die() {
  printf '[%s] ERROR in step "%s": %s\n' "$NB_TAG" "${_nb_step_name:-?}" "$*" >&2
  exit 1
}
note() { printf '[%s]   %s\n' "$NB_TAG" "$*"; }

require_root() {
  [[ $(id -u) -eq 0 ]] || die "must run as root (apt, PostgreSQL and redis management)"
}

# --- apt -------------------------------------------------------------------------------------

ensure_apt_packages() {
  local missing=() p
  for p in "${APT_PACKAGES[@]}"; do
    if [[ "$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null)" != "install ok installed" ]]; then
      missing+=("$p")
    fi
  done
  if ((${#missing[@]} == 0)); then
    step_done "already installed"
    return
  fi
  note "installing: ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  with_progress "apt-get update" apt-get update -qq
  with_progress "apt-get install" bash -c \
    'apt-get install -y -qq --no-install-recommends "$@" >/dev/null' apt-get "${missing[@]}"
  step_done "installed ${missing[*]}"
}

# --- PostgreSQL ------------------------------------------------------------------------------

pg_version() {
  # The newest installed server major version (15 on Debian 12).
  local v
  v=$(ls /usr/lib/postgresql 2>/dev/null | sort -n | tail -1)
  [[ -n "$v" ]] || die "no PostgreSQL server in /usr/lib/postgresql"
  echo "$v"
}

ensure_postgresql() {
  local v
  v=$(pg_version)
  if ! pg_lsclusters -h | awk -v v="$v" '$1 == v && $2 == "main" { f = 1 } END { exit !f }'; then
    note "creating cluster $v/main"
    pg_createcluster "$v" main >/dev/null
  fi
  if pg_ctlcluster "$v" main status >/dev/null 2>&1; then
    step_done "cluster $v/main already running"
  else
    pg_ctlcluster "$v" main start
    : >"$NETBOX_HOME/started-postgresql"
    step_done "started cluster $v/main"
  fi
  local i
  for ((i = 0; i < 30; i++)); do
    pg_isready -q -h 127.0.0.1 -p 5432 && return
    sleep 1
  done
  die "PostgreSQL did not accept connections on 127.0.0.1:5432 within 30 s"
}

# psql as the postgres superuser (peer authentication over the Unix socket).
pg_super() {
  PGOPTIONS='-c client_min_messages=warning' runuser -u postgres -- psql -X -q -v ON_ERROR_STOP=1 "$@"
}

# psql as the NetBox role, over loopback TCP with a password.
pg_netbox() {
  PGOPTIONS='-c client_min_messages=warning' PGPASSWORD="$NETBOX_DB_PASSWORD" psql -X -q -v ON_ERROR_STOP=1 \
    -h 127.0.0.1 -p 5432 -U "$NETBOX_DB_USER" "$@"
}

ensure_db_role() {
  if [[ "$(pg_super -tAc "SELECT 1 FROM pg_roles WHERE rolname = '$NETBOX_DB_USER'")" == 1 ]]; then
    pg_super -c "ALTER ROLE \"$NETBOX_DB_USER\" LOGIN PASSWORD '$NETBOX_DB_PASSWORD'"
  else
    pg_super -c "CREATE ROLE \"$NETBOX_DB_USER\" LOGIN PASSWORD '$NETBOX_DB_PASSWORD'"
  fi
}

db_exists() {
  [[ "$(pg_super -tAc "SELECT 1 FROM pg_database WHERE datname = '$1'")" == 1 ]]
}

drop_db() {
  pg_super -c "DROP DATABASE IF EXISTS \"$1\" WITH (FORCE)"
}

create_db() {
  pg_super -c "CREATE DATABASE \"$1\" OWNER \"$NETBOX_DB_USER\" ENCODING 'UTF8' TEMPLATE template0"
}

# --- redis -----------------------------------------------------------------------------------

ensure_redis() {
  if redis-cli -h 127.0.0.1 -p "$REDIS_PORT" ping 2>/dev/null | grep -q PONG; then
    step_done "already answering on 127.0.0.1:$REDIS_PORT"
    return
  fi
  mkdir -p "$NETBOX_HOME/redis"
  redis-server --daemonize yes --bind 127.0.0.1 --port "$REDIS_PORT" \
    --dir "$NETBOX_HOME/redis" --save '' --appendonly no \
    --pidfile "$NETBOX_HOME/redis.pid" --logfile "$NETBOX_HOME/redis.log"
  local i
  for ((i = 0; i < 50; i++)); do
    if redis-cli -h 127.0.0.1 -p "$REDIS_PORT" ping 2>/dev/null | grep -q PONG; then
      step_done "started on 127.0.0.1:$REDIS_PORT"
      return
    fi
    sleep 0.2
  done
  die "redis-server did not answer on 127.0.0.1:$REDIS_PORT within 10 s (see $NETBOX_HOME/redis.log)"
}

# --- NetBox venv and configuration -----------------------------------------------------------

find_python312() {
  if [[ -n "${NETBOX_PYTHON:-}" ]]; then
    echo "$NETBOX_PYTHON"
  elif command -v pyenv >/dev/null 2>&1 && PYENV_VERSION=3.12.1 pyenv which python3.12 2>/dev/null; then
    :
  elif command -v python3.12 >/dev/null 2>&1; then
    command -v python3.12
  else
    die "no Python 3.12 found (set NETBOX_PYTHON, or install pyenv 3.12.1)"
  fi
}

ensure_venv() {
  if [[ -x "$NETBOX_VENV/bin/netbox" ]] &&
    [[ "$("$NETBOX_VENV/bin/python" -c 'from importlib.metadata import version; print(version("netbox"))' 2>/dev/null)" == "$NETBOX_VERSION" ]]; then
    step_done "reusing $NETBOX_VENV (netbox $NETBOX_VERSION)"
    return
  fi
  local py
  py=$(find_python312)
  rm -rf "$NETBOX_VENV"
  "$py" -m venv "$NETBOX_VENV"
  # pip's stderr is kept for failures only: some hosts print one warning per index entry.
  local log="$NETBOX_HOME/pip-install.log"
  note "pip install netbox==$NETBOX_VERSION (about 2 minutes the first time)"
  if ! with_progress "pip install netbox" bash -c '"$0" install --disable-pip-version-check -q \
      "netbox==$1" >"$2" 2>&1' "$NETBOX_VENV/bin/pip" "$NETBOX_VERSION" "$log"; then
    tail -30 "$log" >&2
    die "pip install netbox==$NETBOX_VERSION failed (log: $log)"
  fi
  step_done "created $NETBOX_VENV with $("$py" --version)"
}

write_configuration() {
  mkdir -p "$NETBOX_ROOT/conf" "$NETBOX_ROOT/media" "$NETBOX_ROOT/scripts" "$NETBOX_ROOT/reports"
  local conf="$NETBOX_ROOT/conf/configuration.py" tmp
  tmp=$(mktemp)
  cat >"$tmp" <<EOF
# Written by machine-agent tests/integration/netbox/lib.sh; rewritten on every up.sh.
# A loopback-only NetBox for integration tests. No traffic leaves the machine.
import os

ALLOWED_HOSTS = ['127.0.0.1', 'localhost']

DATABASES = {
    'default': {
        'ENGINE': 'django.db.backends.postgresql',
        'NAME': os.environ.get('NETBOX_DB_NAME', '$NETBOX_DB_NAME'),
        'USER': '$NETBOX_DB_USER',
        'PASSWORD': '$NETBOX_DB_PASSWORD',
        'HOST': '127.0.0.1',
        'PORT': '5432',
        'CONN_MAX_AGE': 300,
    }
}

REDIS = {
    'tasks': {'HOST': '127.0.0.1', 'PORT': $REDIS_PORT, 'DATABASE': 0, 'SSL': False},
    'caching': {'HOST': '127.0.0.1', 'PORT': $REDIS_PORT, 'DATABASE': 1, 'SSL': False},
}

# Test-only secrets (the instance listens on loopback only).
SECRET_KEY = 'machine-agent-netbox-test-secret-key-not-for-production-0123456789'
API_TOKEN_PEPPERS = {1: 'machine-agent-netbox-test-pepper-not-for-production-0123456789'}

# No outside traffic: no census, no release check, no Copilot script in the UI.
CENSUS_REPORTING_ENABLED = False
RELEASE_CHECK_URL = None
COPILOT_ENABLED = False

TIME_ZONE = 'UTC'
EOF
  if [[ -f "$conf" ]] && cmp -s "$tmp" "$conf"; then
    rm -f "$tmp"
    step_done "unchanged $conf"
    return 1
  fi
  mv "$tmp" "$conf"
  touch "$NETBOX_ROOT/conf/__init__.py"
  step_done "wrote $conf"
  return 0
}

# Run a NetBox management command with this instance's configuration.
nb() { "$NETBOX_VENV/bin/netbox" "$@"; }

# --- gunicorn --------------------------------------------------------------------------------

gunicorn_running() {
  [[ -f "$GUNICORN_PID" ]] && kill -0 "$(cat "$GUNICORN_PID")" 2>/dev/null
}

stop_gunicorn() {
  if ! gunicorn_running; then
    rm -f "$GUNICORN_PID"
    return 1
  fi
  local pid i
  pid=$(cat "$GUNICORN_PID")
  # INT is gunicorn's quick shutdown (TERM waits up to 30 s for requests in flight).
  kill -INT "$pid" 2>/dev/null || true
  for ((i = 0; i < 100; i++)); do
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
  done
  if kill -0 "$pid" 2>/dev/null; then
    # up.sh starts gunicorn with setsid: its pid is the process group of master and workers.
    kill -KILL -- "-$pid" 2>/dev/null || true
  fi
  rm -f "$GUNICORN_PID"
  return 0
}
