#!/usr/bin/env bash
# Stop the test NetBox started by up.sh.
#
# Stops gunicorn (pid file). PostgreSQL and redis are stopped only if up.sh (or
# regenerate-dump.sh) started them, so a machine that already ran them keeps them.
# Pass --keep-services to leave them running anyway (the next up.sh is then faster).
# The venv, the database and $NETBOX_HOME are kept: the next up.sh reuses them.
# To remove everything: down.sh, then `rm -rf "$NETBOX_HOME"` and drop the netbox database.
set -euo pipefail
NB_TAG=netbox-down
# shellcheck source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
require_root

keep_services=0
[[ "${1:-}" == "--keep-services" ]] && keep_services=1

step "gunicorn"
if stop_gunicorn; then step_done "stopped"; else step_done "not running"; fi

step "redis"
if ((keep_services)); then
  step_done "kept (--keep-services)"
elif [[ -f "$NETBOX_HOME/redis.pid" ]] && kill -0 "$(cat "$NETBOX_HOME/redis.pid")" 2>/dev/null; then
  pid=$(cat "$NETBOX_HOME/redis.pid")
  redis-cli -h 127.0.0.1 -p "$REDIS_PORT" shutdown nosave >/dev/null 2>&1 || kill "$pid" 2>/dev/null || true
  for ((i = 0; i < 50; i++)); do
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
  done
  kill -0 "$pid" 2>/dev/null && die "redis-server (pid $pid) did not stop within 5 s"
  rm -f "$NETBOX_HOME/redis.pid"
  step_done "stopped (started by up.sh)"
else
  step_done "not started by up.sh; left alone"
fi

step "postgresql"
v=$(pg_version)
if ((keep_services)); then
  step_done "kept (--keep-services)"
elif [[ -f "$NETBOX_HOME/started-postgresql" ]]; then
  pg_ctlcluster "$v" main stop || true
  rm -f "$NETBOX_HOME/started-postgresql"
  step_done "stopped cluster $v/main (started by up.sh)"
else
  step_done "not started by up.sh; left alone"
fi

total_done
