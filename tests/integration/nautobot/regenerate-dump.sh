#!/usr/bin/env bash
# Regenerate nautobot.sql.gz: migrate an empty database with Nautobot 3.2.7 and dump it.
# Slow (`nautobot-server migrate` on an empty database: about 4.5 minutes on 2 cores), so it
# is run by hand when the Nautobot version changes, and the result is committed. up.sh
# restores the dump in seconds and proves it current with `migrate --check`.
set -euo pipefail
NB_TAG=nautobot-regenerate-dump
# shellcheck source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
require_root
REGEN_DB=nautobot_regen

step "apt packages";  ensure_apt_packages
step "postgresql";    ensure_postgresql
step "redis";         ensure_redis
step "nautobot venv"; ensure_nautobot_venv
step "configuration"; write_nautobot_configuration || true
step "scratch database $REGEN_DB"
ensure_nautobot_role
drop_db "$REGEN_DB"
create_nautobot_db "$REGEN_DB"
step_done
step "nautobot-server migrate (slow)"
NAUTOBOT_DB_NAME=$REGEN_DB nautobot_server migrate --no-input >"$NAUTOBOT_HOME/regen-migrate.log" 2>&1 ||
  { tail -30 "$NAUTOBOT_HOME/regen-migrate.log" >&2; die "migrate failed"; }
step_done "$(grep -c '  Applying ' "$NAUTOBOT_HOME/regen-migrate.log") migrations applied"
step "pg_dump -> nautobot.sql.gz"
PGPASSWORD="$NAUTOBOT_DB_PASSWORD" pg_dump -h 127.0.0.1 -U "$NAUTOBOT_DB_USER" --no-owner \
  --no-privileges "$REGEN_DB" | gzip -9n >"$NAUTOBOT_DUMP"
drop_db "$REGEN_DB"
step_done "$(du -h "$NAUTOBOT_DUMP" | cut -f1)"
total_done
