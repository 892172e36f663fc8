#!/usr/bin/env bash
# Bring up a real NetBox 4.7.3 on http://127.0.0.1:8001 for the integration tests.
#
#   bash tests/integration/netbox/up.sh     (as root; idempotent; see README.md)
#
# Ends by writing $NETBOX_HOME/env (NETBOX_URL, NETBOX_TOKEN, ids of the seed objects).
set -euo pipefail
NB_TAG=netbox-up
# shellcheck source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
require_root

# The fixed v2 API token of the test user (12-character key, 40-character secret).
NETBOX_TOKEN_KEY="${NETBOX_TOKEN_KEY:-machineagent}"
NETBOX_TOKEN_SECRET="${NETBOX_TOKEN_SECRET:-MachineAgentIntegrationTestSecret0000001}"
[[ ${#NETBOX_TOKEN_KEY} -eq 12 && ${#NETBOX_TOKEN_SECRET} -eq 40 ]] ||
  die "NETBOX_TOKEN_KEY must have 12 characters and NETBOX_TOKEN_SECRET 40"
NETBOX_TOKEN="nbt_${NETBOX_TOKEN_KEY}.${NETBOX_TOKEN_SECRET}"
READY_TIMEOUT="${NETBOX_READY_TIMEOUT:-60}"
restart=0

step "apt packages";  ensure_apt_packages
step "postgresql";    ensure_postgresql
step "redis";         ensure_redis
step "netbox venv";   ensure_venv
step "configuration"; if write_configuration; then restart=1; fi

step "database $NETBOX_DB_NAME"
[[ -f "$NETBOX_DUMP" ]] || die "missing $NETBOX_DUMP (run regenerate-dump.sh)"
ensure_db_role
dump_sha=$(sha256sum "$NETBOX_DUMP" | cut -d' ' -f1)
if db_exists "$NETBOX_DB_NAME" && [[ "$(cat "$NETBOX_HOME/db.sha256" 2>/dev/null)" == "$dump_sha" ]]; then
  step_done "exists, restored from this dump; kept"
else
  # New, or restored from another dump: start over from this one.
  stop_gunicorn || true
  restart=1
  drop_db "$NETBOX_DB_NAME"
  create_db "$NETBOX_DB_NAME"
  restore() { gunzip -c "$NETBOX_DUMP" | pg_netbox --single-transaction -d "$NETBOX_DB_NAME" >/dev/null; }
  with_progress "restoring $(basename "$NETBOX_DUMP")" restore
  echo "$dump_sha" >"$NETBOX_HOME/db.sha256"
  step_done "restored $(basename "$NETBOX_DUMP")"
fi

step "netbox migrate --check"
# --skip-checks: Django's system checks add 5 s here; gunicorn's start-up validates the configuration.
if ! out=$(nb migrate --check --skip-checks 2>&1); then
  [[ -z "$out" ]] || echo "$out" >&2
  echo "Unapplied migrations:" >&2
  nb migrate --plan --skip-checks 2>&1 | head -20 >&2 || true
  die "database $NETBOX_DB_NAME is not current for netbox $NETBOX_VERSION. If netbox.sql.gz is stale: run" \
    "regenerate-dump.sh and commit it. If only this local database drifted: rm $NETBOX_HOME/db.sha256 and rerun."
fi
step_done "no unapplied migrations"

step "seed user, token and IPAM data"
seed_env=$("$NETBOX_VENV/bin/python" "$NB_DIR/seed.py" "$NETBOX_TOKEN_KEY" "$NETBOX_TOKEN_SECRET") ||
  die "seed.py failed"
step_done

step "gunicorn on 127.0.0.1:$NETBOX_PORT"
if gunicorn_running && ((restart)); then
  stop_gunicorn
  note "stopped the running gunicorn (configuration or database changed)"
fi
if gunicorn_running; then
  step_done "already running (pid $(cat "$GUNICORN_PID"))"
else
  "$NETBOX_VENV/bin/python" "$NB_DIR/nbapi.py" port-free 127.0.0.1 "$NETBOX_PORT" ||
    die "127.0.0.1:$NETBOX_PORT is taken by something that is not this NetBox"
  # setsid: gunicorn leads its own process group, so down.sh can take master and workers
  # together; gunicorn writes its own pid file.
  setsid "$NETBOX_VENV/bin/gunicorn" \
    --bind "127.0.0.1:$NETBOX_PORT" --workers 2 --threads 4 --timeout 120 \
    --no-control-socket --pythonpath "$NETBOX_ROOT" --pid "$GUNICORN_PID" \
    --access-logfile - --error-logfile - \
    netbox.wsgi </dev/null >>"$GUNICORN_LOG" 2>&1 &
  step_done "started (log: $GUNICORN_LOG)"
fi

step "wait for GET /api/status/ (<= ${READY_TIMEOUT}s)"
"$NETBOX_VENV/bin/python" "$NB_DIR/nbapi.py" wait "$NETBOX_URL" "$NETBOX_TOKEN" "$READY_TIMEOUT" || {
  tail -30 "$GUNICORN_LOG" >&2
  die "NetBox did not answer 200 on $NETBOX_URL/api/status/"
}
step_done "200"

step "env file"
tmp=$(mktemp "$NETBOX_HOME/env.XXXXXX")
{
  echo "# Written by tests/integration/netbox/up.sh"
  echo "NETBOX_URL=$NETBOX_URL"
  echo "NETBOX_HOME=$NETBOX_HOME"
  echo "$seed_env"
} >"$tmp"
[[ "$(grep -c '^NETBOX_TOKEN=' "$tmp")" == 1 ]] || die "seed.py did not report the token"
chmod 644 "$tmp"
mv "$tmp" "$NETBOX_ENV_FILE"
step_done "$NETBOX_ENV_FILE"

total_done
