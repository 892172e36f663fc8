# shellcheck shell=bash
# Shared by up.sh, down.sh and regenerate-dump.sh. Source it; do not run it.
# PostgreSQL, redis and the step/progress helpers are NetBox's (../netbox/lib.sh): both
# test servers use the same local services, each with its own database and redis DBs.
#
# Everything Nautobot writes lives under $NAUTOBOT_HOME (outside the repository):
#   venv/              the Nautobot virtualenv (nautobot==3.2.7 and gunicorn, Python 3.11)
#   root/              NAUTOBOT_ROOT: nautobot_config.py, media, jobs, git
#   env                the file tests source: NAUTOBOT_URL, NAUTOBOT_TOKEN
#   gunicorn.pid/.log  the server
#   db.sha256          sha256 of the dump the database was restored from
NB_TAG="${NB_TAG:-nautobot}"
# shellcheck source=../netbox/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../netbox/lib.sh"

NAUTOBOT_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
NAUTOBOT_VERSION=3.2.7
NAUTOBOT_HOME="${NAUTOBOT_HOME:-/var/tmp/machine-agent-nautobot}"
NAUTOBOT_VENV="$NAUTOBOT_HOME/venv"
NAUTOBOT_ROOT="$NAUTOBOT_HOME/root"
NAUTOBOT_CONFIG="$NAUTOBOT_ROOT/nautobot_config.py"
NAUTOBOT_PORT="${NAUTOBOT_PORT:-8002}"
NAUTOBOT_URL="http://127.0.0.1:$NAUTOBOT_PORT"
NAUTOBOT_DB_NAME="${NAUTOBOT_DB_NAME:-nautobot}"
NAUTOBOT_DB_USER=nautobot
# Loopback-only throwaway instance: fixed credentials are fine and keep runs reproducible.
NAUTOBOT_DB_PASSWORD=machine-agent-test-db
NAUTOBOT_DUMP="$NAUTOBOT_DIR/nautobot.sql.gz"
NAUTOBOT_GUNICORN_PID="$NAUTOBOT_HOME/gunicorn.pid"
NAUTOBOT_GUNICORN_LOG="$NAUTOBOT_HOME/gunicorn.log"
# A fixed token of the test user (Nautobot's tokens are 40 hexadecimal characters).
NAUTOBOT_TOKEN="${NAUTOBOT_TOKEN:-6d616368696e652d6167656e742d746573743031}"
export NAUTOBOT_ROOT NAUTOBOT_CONFIG NAUTOBOT_DB_NAME
mkdir -p "$NAUTOBOT_HOME"

nautobot_pg() {
  PGOPTIONS='-c client_min_messages=warning' PGPASSWORD="$NAUTOBOT_DB_PASSWORD" psql -X -q \
    -v ON_ERROR_STOP=1 -h 127.0.0.1 -p 5432 -U "$NAUTOBOT_DB_USER" "$@"
}

ensure_nautobot_role() {
  local verb=CREATE
  [[ "$(pg_super -tAc "SELECT 1 FROM pg_roles WHERE rolname = '$NAUTOBOT_DB_USER'")" == 1 ]] && verb=ALTER
  pg_super -c "$verb ROLE \"$NAUTOBOT_DB_USER\" LOGIN PASSWORD '$NAUTOBOT_DB_PASSWORD'"
}

create_nautobot_db() {
  pg_super -c "CREATE DATABASE \"$1\" OWNER \"$NAUTOBOT_DB_USER\" ENCODING 'UTF8' TEMPLATE template0"
}

nautobot_server() { "$NAUTOBOT_VENV/bin/nautobot-server" --config "$NAUTOBOT_CONFIG" "$@"; }

ensure_nautobot_venv() {
  if [[ -x "$NAUTOBOT_VENV/bin/nautobot-server" && -x "$NAUTOBOT_VENV/bin/gunicorn" ]] &&
    [[ "$("$NAUTOBOT_VENV/bin/python" -c 'from importlib.metadata import version; print(version("nautobot"))' 2>/dev/null)" == "$NAUTOBOT_VERSION" ]]; then
    step_done "reusing $NAUTOBOT_VENV (nautobot $NAUTOBOT_VERSION)"
    return
  fi
  rm -rf "$NAUTOBOT_VENV"
  python3 -m venv "$NAUTOBOT_VENV"
  local log="$NAUTOBOT_HOME/pip-install.log"
  note "pip install nautobot==$NAUTOBOT_VERSION gunicorn (about 2 minutes the first time)"
  if ! with_progress "pip install nautobot" bash -c '"$0" install --disable-pip-version-check -q \
      "nautobot==$1" gunicorn >"$2" 2>&1' "$NAUTOBOT_VENV/bin/pip" "$NAUTOBOT_VERSION" "$log"; then
    tail -30 "$log" >&2
    die "pip install nautobot==$NAUTOBOT_VERSION failed (log: $log)"
  fi
  step_done "created $NAUTOBOT_VENV"
}

write_nautobot_configuration() {
  mkdir -p "$NAUTOBOT_ROOT"
  local tmp
  tmp=$(mktemp)
  cat >"$tmp" <<CONF
# Written by machine-agent tests/integration/nautobot/lib.sh; rewritten on every up.sh.
# A loopback-only Nautobot for integration tests. No traffic leaves the machine.
import os

from nautobot.core.settings import *  # noqa: F403

ALLOWED_HOSTS = ["127.0.0.1", "localhost"]
DATABASES = {"default": {
    "ENGINE": "django.db.backends.postgresql",
    "NAME": os.environ.get("NAUTOBOT_DB_NAME", "$NAUTOBOT_DB_NAME"),
    "USER": "$NAUTOBOT_DB_USER", "PASSWORD": "$NAUTOBOT_DB_PASSWORD",
    "HOST": "127.0.0.1", "PORT": "5432", "CONN_MAX_AGE": 300}}
# redis DBs 2-4 (NetBox's tests use 0 and 1)
CACHES = {"default": {"BACKEND": "django_redis.cache.RedisCache",
                      "LOCATION": "redis://127.0.0.1:$REDIS_PORT/2", "TIMEOUT": 300,
                      "OPTIONS": {"CLIENT_CLASS": "django_redis.client.DefaultClient"}}}
CELERY_BROKER_URL = "redis://127.0.0.1:$REDIS_PORT/3"
CELERY_RESULT_BACKEND = "redis://127.0.0.1:$REDIS_PORT/4"
# Test-only secret (the instance listens on loopback only).
SECRET_KEY = "machine-agent-nautobot-test-secret-key-not-for-production-0123456789"
INSTALLATION_METRICS_ENABLED = False
TIME_ZONE = "UTC"
CONF
  if [[ -f "$NAUTOBOT_CONFIG" ]] && cmp -s "$tmp" "$NAUTOBOT_CONFIG"; then
    rm -f "$tmp"
    step_done "unchanged $NAUTOBOT_CONFIG"
    return 1
  fi
  mv "$tmp" "$NAUTOBOT_CONFIG"
  step_done "wrote $NAUTOBOT_CONFIG"
  return 0
}

nautobot_gunicorn_running() {
  [[ -f "$NAUTOBOT_GUNICORN_PID" ]] && kill -0 "$(cat "$NAUTOBOT_GUNICORN_PID")" 2>/dev/null
}

stop_nautobot_gunicorn() {
  nautobot_gunicorn_running || return 1
  local pid i
  pid=$(cat "$NAUTOBOT_GUNICORN_PID")
  kill -TERM -- "-$pid" 2>/dev/null || kill -TERM "$pid"
  for ((i = 0; i < 100; i++)); do
    kill -0 "$pid" 2>/dev/null || { rm -f "$NAUTOBOT_GUNICORN_PID"; return 0; }
    sleep 0.1
  done
  kill -KILL -- "-$pid" 2>/dev/null || true
  rm -f "$NAUTOBOT_GUNICORN_PID"
}
