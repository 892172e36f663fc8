#!/usr/bin/env bash
# Delete the test allocations from the running test NetBox, keeping the seed data:
# every IP address whose machine_agent_claim_key custom field is set, and every other IP
# address inside the seed prefixes except the ones tagged `gateway`. Through the REST API
# (bulk DELETE), so NetBox's change log and search cache stay consistent. About 0.2 s.
# Needs no root; reads $NETBOX_HOME/env written by up.sh.
set -euo pipefail
NB_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
NETBOX_HOME="${NETBOX_HOME:-/var/tmp/machine-agent-netbox}"
# shellcheck source=/dev/null
source "$NETBOX_HOME/env"
exec "$NETBOX_HOME/venv/bin/python" "$NB_DIR/nbapi.py" reset "$NETBOX_URL" "$NETBOX_TOKEN"
