# Sourced by tests/setup.sh: a real Nautobot for the nautobot IPAM plugin's tests
# (tests/integration/nautobot/README.md), and its URL and token in the env.
bash tests/integration/nautobot/up.sh
set -a
# shellcheck source=/dev/null
source "${NAUTOBOT_HOME:-/var/tmp/machine-agent-nautobot}/env"
set +a
