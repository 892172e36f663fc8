#!/usr/bin/env bash
# Regenerate netbox.sql.gz: migrate an empty database with NetBox 4.7.3 and dump it.
#
# Slow (`netbox migrate` on an empty database: 6-9 minutes on 2 cores), so it is run by hand
# when the NetBox version changes, and the result is committed. up.sh restores the dump in
# seconds and proves it current with `netbox migrate --check`.
#
# Uses a scratch database (netbox_regen), so a running up.sh instance is left untouched.
set -euo pipefail
NB_TAG=regenerate-dump
# shellcheck source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
require_root

REGEN_DB=netbox_regen

step "apt packages";  ensure_apt_packages
step "postgresql";    ensure_postgresql
step "redis";         ensure_redis
step "netbox venv";   ensure_venv
step "configuration"; write_configuration || true

step "scratch database $REGEN_DB"
ensure_db_role
drop_db "$REGEN_DB"
create_db "$REGEN_DB"
step_done

step "netbox migrate (slow)"
NETBOX_DB_NAME=$REGEN_DB nb migrate --no-input >"$NETBOX_HOME/regen-migrate.log" 2>&1 ||
  { tail -30 "$NETBOX_HOME/regen-migrate.log" >&2; die "migrate failed (log: $NETBOX_HOME/regen-migrate.log)"; }
step_done "$(grep -c '  Applying ' "$NETBOX_HOME/regen-migrate.log") migrations applied"

step "migrate --check"
NETBOX_DB_NAME=$REGEN_DB nb migrate --check >/dev/null || die "migrations still pending after migrate"
step_done

step "pg_dump -> netbox.sql.gz"
tmp=$(mktemp)
# Plain SQL without owners or grants: restored as the netbox role, everything it creates is its own.
# gzip -n: no name or timestamp in the header, so an unchanged dump gives an unchanged file.
PGPASSWORD="$NETBOX_DB_PASSWORD" pg_dump -h 127.0.0.1 -p 5432 -U "$NETBOX_DB_USER" \
  --no-owner --no-privileges --format=plain "$REGEN_DB" | gzip -9 -n >"$tmp"
mv "$tmp" "$NETBOX_DUMP"
chmod 644 "$NETBOX_DUMP"
step_done "$(du -k "$NETBOX_DUMP" | cut -f1) KiB"

step "drop scratch database"
drop_db "$REGEN_DB"
step_done

total_done
