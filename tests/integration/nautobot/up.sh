#!/usr/bin/env bash
# Bring up a real Nautobot 3.2.7 on http://127.0.0.1:8002 for the integration tests.
#
#   bash tests/integration/nautobot/up.sh     (as root; idempotent; see README.md)
#
# Ends by writing $NAUTOBOT_HOME/env (NAUTOBOT_URL, NAUTOBOT_TOKEN).
set -euo pipefail
NB_TAG=nautobot-up
# shellcheck source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
require_root
restart=0

step "apt packages";  ensure_apt_packages
step "postgresql";    ensure_postgresql
step "redis";         ensure_redis
step "nautobot venv"; ensure_nautobot_venv
step "configuration"; if write_nautobot_configuration; then restart=1; fi

step "database $NAUTOBOT_DB_NAME"
[[ -f "$NAUTOBOT_DUMP" ]] || die "missing $NAUTOBOT_DUMP (run regenerate-dump.sh)"
ensure_nautobot_role
dump_sha=$(sha256sum "$NAUTOBOT_DUMP" | cut -d' ' -f1)
if db_exists "$NAUTOBOT_DB_NAME" && [[ "$(cat "$NAUTOBOT_HOME/db.sha256" 2>/dev/null)" == "$dump_sha" ]]; then
  step_done "exists, restored from this dump; kept"
else
  stop_nautobot_gunicorn || true
  restart=1
  drop_db "$NAUTOBOT_DB_NAME"
  create_nautobot_db "$NAUTOBOT_DB_NAME"
  restore() { gunzip -c "$NAUTOBOT_DUMP" | nautobot_pg --single-transaction -d "$NAUTOBOT_DB_NAME" >/dev/null; }
  with_progress "restoring $(basename "$NAUTOBOT_DUMP")" restore
  echo "$dump_sha" >"$NAUTOBOT_HOME/db.sha256"
  step_done "restored $(basename "$NAUTOBOT_DUMP")"
fi

step "nautobot-server migrate --check"
if ! out=$(nautobot_server migrate --check 2>&1); then
  echo "$out" | tail -20 >&2
  die "database $NAUTOBOT_DB_NAME is not current for nautobot $NAUTOBOT_VERSION: run regenerate-dump.sh and commit nautobot.sql.gz"
fi
step_done "no unapplied migrations"

step "seed user, token, custom fields"
nautobot_server nbshell --command "exec(open('$NAUTOBOT_DIR/seed.py').read())" >"$NAUTOBOT_HOME/seed.log" 2>&1 ||
  { tail -20 "$NAUTOBOT_HOME/seed.log" >&2; die "seed.py failed"; }
step_done

step "gunicorn on 127.0.0.1:$NAUTOBOT_PORT"
if nautobot_gunicorn_running && ((restart)); then
  stop_nautobot_gunicorn
  note "stopped the running gunicorn (configuration or database changed)"
fi
if nautobot_gunicorn_running; then
  step_done "already running (pid $(cat "$NAUTOBOT_GUNICORN_PID"))"
else
  "$NAUTOBOT_VENV/bin/python" "$NB_DIR/nbapi.py" port-free 127.0.0.1 "$NAUTOBOT_PORT" ||
    die "127.0.0.1:$NAUTOBOT_PORT is taken by something that is not this Nautobot"
  setsid "$NAUTOBOT_VENV/bin/gunicorn" \
    --bind "127.0.0.1:$NAUTOBOT_PORT" --workers 2 --threads 4 --timeout 120 \
    --no-control-socket --pythonpath "$NAUTOBOT_ROOT" --pid "$NAUTOBOT_GUNICORN_PID" \
    --access-logfile - --error-logfile - \
    nautobot.core.wsgi </dev/null >>"$NAUTOBOT_GUNICORN_LOG" 2>&1 &
  step_done "started (log: $NAUTOBOT_GUNICORN_LOG)"
fi

step "ready"
ready() {
  local i
  for ((i = 0; i < 120; i++)); do
    curl -sf -o /dev/null -H "Authorization: Token $NAUTOBOT_TOKEN" "$NAUTOBOT_URL/api/status/" && return 0
    sleep 0.5
  done
  return 1
}
with_progress "waiting for $NAUTOBOT_URL/api/status/" ready ||
  { tail -30 "$NAUTOBOT_GUNICORN_LOG" >&2; die "Nautobot did not answer within 60 s"; }
step_done "$NAUTOBOT_URL answers"

printf 'NAUTOBOT_URL=%s\nNAUTOBOT_TOKEN=%s\n' "$NAUTOBOT_URL" "$NAUTOBOT_TOKEN" >"$NAUTOBOT_HOME/env"
total_done
