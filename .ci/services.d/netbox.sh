# Sourced by .ci/run before the tests: a real NetBox for the IPAM plugin's tests
# (tests/integration/netbox/README.md), and its URL, token and object ids in the env.
bash tests/integration/netbox/up.sh
set -a
# shellcheck source=/dev/null
source "${NETBOX_HOME:-/var/tmp/machine-agent-netbox}/env"
set +a
