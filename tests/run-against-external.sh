#!/usr/bin/env bash
# The management-cluster suites against an external API server, with nothing skipped
# (docs/e2e-against-a-real-cluster.md).
#
#   tests/run-against-external.sh [PYTEST ARGS...]
#
# With MACHINE_AGENT_TEST_KUBECONFIG set (an admin kubeconfig of a kind or other cluster,
# the CRDs of sandbox/machine_agent_sandbox/crds/ installed) the suites run there. Without
# it, the API stand-in is started as a separate process on 127.0.0.1 without its pool
# controller (a cluster with only the CRDs has no IPAM provider) and only its admin
# kubeconfig is handed over, as a real cluster's would be; it is stopped at the end.
#
# No test path among PYTEST ARGS: the identity, kube, ipam, daemon and doctor suites are
# added (never the whole suite, whose image boot tests need no API server). Any skip fails the
# run (MACHINE_AGENT_TEST_NO_SKIP=1, tests/conftest.py); `-rs` still lists skips.
# As root, like the suites (network namespaces); NetBox up for the ipam suite.
set -euo pipefail
cd "$(dirname "$0")/.."

SUITES=(tests/integration/identity tests/integration/kube tests/integration/ipam
        tests/integration/daemon tests/integration/doctor)
given=0
for arg in "$@"; do [ -e "${arg%%::*}" ] && given=1; done
if [ "$given" -eq 0 ]; then set -- "$@" "${SUITES[@]}"; fi

if [ -z "${MACHINE_AGENT_TEST_KUBECONFIG:-}" ]; then
    work=$(mktemp -d /tmp/ma-external.XXXXXX)
    .venv/bin/python -m machine_agent_sandbox.apiserver --host 127.0.0.1 --port 0 \
        --state-dir "$work/apiserver" --no-ipam >"$work/apiserver.log" 2>&1 &
    server=$!
    trap 'kill "$server" 2>/dev/null; wait "$server" 2>/dev/null; rm -rf "$work"' EXIT
    for _ in $(seq 200); do  # at most 20 s; the kubeconfig is written last, atomically
        [ -e "$work/apiserver/admin.kubeconfig" ] && break
        kill -0 "$server" 2>/dev/null || { cat "$work/apiserver.log"; exit 1; }
        sleep 0.1
    done
    [ -e "$work/apiserver/admin.kubeconfig" ] || {
        echo "the stand-in did not start:"; cat "$work/apiserver.log"; exit 1; }
    export MACHINE_AGENT_TEST_KUBECONFIG="$work/apiserver/admin.kubeconfig"
    echo "external API server: the stand-in as a process ($(head -1 "$work/apiserver.log"))"
fi

MACHINE_AGENT_TEST_NO_SKIP=1 .venv/bin/python -m pytest -rs "$@"
