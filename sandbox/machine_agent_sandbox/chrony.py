"""chronyd in the sandbox: a server in the router namespace, and the private client each
node's agent starts. Every chronyd runs with -x (the host clock is never touched), on
private sockets and pid files, so a system chronyd is neither used nor disturbed."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

from agent.errors import PermanentError
from machine_agent_sandbox.cleanup import Registry
from machine_agent_sandbox.netns import NTP_ADDRESS

START_WAIT = 10.0


def private_dir(path: Path) -> Path:
    """chronyd refuses socket directories others may write; 0770, owned by root."""
    path.mkdir(parents=True, exist_ok=True)
    path.chmod(0o770)
    return path


def start_server(registry: Registry, router: str) -> subprocess.Popen[bytes]:
    """chronyd serving time on NTP_ADDRESS:123 inside the router namespace (`local
    stratum 8`: it serves its own clock, which it never changes: -x)."""
    home = private_dir(registry.base / "ntp")
    conf = home / "server.conf"
    conf.write_text(f"""port 123
bindaddress {NTP_ADDRESS}
local stratum 8
allow all
cmdport 0
bindcmdaddress {home}/chronyd.sock
pidfile {home}/chronyd.pid
driftfile {home}/drift
""")
    # -u root: the private directory is root's; chronyd refuses one another user owns.
    server = registry.spawn(["ip", "netns", "exec", router, "chronyd", "-f", str(conf), "-x", "-u",
                    "root", "-d"], home / "chronyd.log")
    deadline = time.monotonic() + START_WAIT
    while not (home / "chronyd.pid").exists():
        if time.monotonic() > deadline:
            log = (home / "chronyd.log").read_text()[-500:]
            raise PermanentError(f"the sandbox's NTP server did not start: {log}")
        time.sleep(0.05)
    return server


class Client:
    """What the node's agent needs to run its chronyd privately: the file wrapping the
    chrony.conf the agent renders, and where its socket and pid file go."""

    def __init__(self, registry: Registry, home: Path, node_root: Path) -> None:
        self.home = private_dir(home)
        self.socket = self.home / "chronyd.sock"
        self.pidfile = self.home / "chronyd.pid"
        self.wrapper = self.home / "client.conf"
        # The node's sources and the rest come from the rendered file; around it, only
        # what keeps this chronyd private: its socket, its pid file, no NTP port.
        self.wrapper.write_text(f"""include {node_root}/etc/chrony/chrony.conf
port 0
cmdport 0
bindcmdaddress {self.socket}
pidfile {self.pidfile}
""")
        registry.pidfile(self.pidfile)
        # The node's `systemctl restart chrony`: idempotent, so an agent killed right after
        # it and run again restarts chronyd rather than failing on the running one.
        self.restart = self.home / "restart-chronyd"
        self.restart.write_text(f"""#!/bin/sh
pid=$(cat '{self.pidfile}' 2>/dev/null)
if [ -n "$pid" ] && kill "$pid" 2>/dev/null; then
  for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
fi
exec chronyd -x -u root -f '{self.wrapper}'
""")
        self.restart.chmod(0o755)

    def time_settings(self) -> dict[str, object]:
        """spec.time for the node: the router's NTP server, polled fast, the gate short."""
        return {
            "servers": [{"host": NTP_ADDRESS, "minpoll": -2, "maxpoll": 0}],
            "checkInterval": "200ms",
            "syncTimeout": "5s",
            "chrony": {"driftFile": str(self.home / "drift"), "rtcsync": False,
                       "commandAddress": str(self.socket)},
            # The node's "restart chronyd": (re)start the private client on the rendered
            # file, never touching the clock.
            "reloadCommand": [str(self.restart)],
        }
