"""`python -m machine_agent_sandbox.apiserver --port N --state-dir D`: run the stand-in until
interrupted. Prints its URL; writes ca.crt and admin.kubeconfig into D."""

from __future__ import annotations

import argparse
import signal
import sys
import threading

from .apiserver import ApiServer
from .compaction import DEFAULT_INTERVAL as DEFAULT_COMPACTION


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m machine_agent_sandbox.apiserver",
                                     description=__doc__)
    parser.add_argument("--port", type=int, default=0, help="0 picks a free port")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--state-dir", required=True)
    parser.add_argument("--extra-ip", action="append", default=[],
                        help="another IP for the serving certificate (repeatable)")
    parser.add_argument("--no-ipam", action="store_true",
                        help="do not run the in-cluster IPAM pool controller")
    parser.add_argument("--no-ipam-conditions", action="store_true",
                        help="the pool controller sets no Ready condition (as the released "
                             "provider)")
    parser.add_argument("--no-controllers", action="store_true",
                        help="run no garbage collector and no pool controller: a bare "
                             "kube-apiserver with etcd, as the recorded corpus was made")
    parser.add_argument("--compaction-interval", type=float, default=DEFAULT_COMPACTION,
                        metavar="SECONDS",
                        help="compact the watch history this often, as kube-apiserver "
                             "has etcd compacted (default %(default)g; 0: never)")
    args = parser.parse_args(argv)
    server = ApiServer(args.state_dir, host=args.host, port=args.port,
                       extra_ips=args.extra_ip, ipam=not args.no_ipam,
                       ipam_conditions=not args.no_ipam_conditions,
                       controllers=not args.no_controllers,
                       compaction_interval=args.compaction_interval or None).start()
    done = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: done.set())
    signal.signal(signal.SIGINT, lambda *_: done.set())
    print(server.url, flush=True)
    print(f"kubeconfig: {server.state_dir / 'admin.kubeconfig'}", file=sys.stderr, flush=True)
    done.wait()
    server.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
