#!/usr/bin/env bash
# Stop the test Nautobot started by up.sh (gunicorn only: PostgreSQL and redis are shared
# with the test NetBox; its down.sh stops them). The venv and the database are kept.
set -euo pipefail
NB_TAG=nautobot-down
# shellcheck source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
require_root
step "gunicorn"
if stop_nautobot_gunicorn; then step_done "stopped"; else step_done "not running"; fi
total_done
