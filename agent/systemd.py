"""systemd integration without systemd's bindings: sd_notify(3) over $NOTIFY_SOCKET, a
Reporter that turns conditions into `STATUS=`/`READY=1`, and the watchdog keepalive.

The protocol (sd_notify(3), systemd's src/libsystemd/sd-daemon/sd-daemon.c): one datagram
of newline-separated `KEY=VALUE` assignments to the AF_UNIX socket named by
$NOTIFY_SOCKET; a name starting with `@` is in the abstract namespace (a leading NUL).
Notification is best effort: a service outside systemd (no $NOTIFY_SOCKET) or a lost
datagram must never stop the agent.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
from collections.abc import Mapping, MutableMapping

from agent.report import SUMMARY, Condition

log = logging.getLogger(__name__)

MANAGER_ENV = ("NOTIFY_SOCKET", "WATCHDOG_USEC", "WATCHDOG_PID")
"""Variables systemd hands the service: consumed, so that commands the agent runs
(kubeadm, chronyc, ...) do not inherit them and talk to systemd in its name."""

SEND_TIMEOUT = 2.0
"""Seconds a send may wait for room in the manager's socket queue; systemd drains it at
once, so this bounds the wait only when something else holds the socket."""


class Notifier:
    """Sends sd_notify messages to one socket address."""

    def __init__(self, address: str) -> None:
        self.address = "\0" + address[1:] if address.startswith("@") else address

    @classmethod
    def from_environment(cls, env: Mapping[str, str]) -> Notifier | None:
        """The notifier systemd asked for; None when not run by systemd as Type=notify."""
        address = env.get("NOTIFY_SOCKET", "")
        if not address.startswith(("/", "@")):
            # vsock: addresses (systemd >= 254) are not used for services on a node.
            return None
        return cls(address)

    def send(self, *assignments: str) -> bool:
        """Send `KEY=VALUE` assignments in one datagram; False (logged) if it failed."""
        payload = "\n".join(assignments).encode()
        try:
            with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM | socket.SOCK_CLOEXEC) as s:
                s.settimeout(SEND_TIMEOUT)
                s.sendto(payload, self.address)
        except OSError as err:
            log.debug("sd_notify to %r failed: %s", self.address, err)
            return False
        return True


def take_manager_env(env: MutableMapping[str, str]) -> tuple[Notifier | None, Watchdog | None]:
    """The notifier and watchdog systemd configured (each None when not asked for), with
    the manager's variables removed from `env`."""
    notifier = Notifier.from_environment(env)
    watchdog = Watchdog.from_environment(env, notifier) if notifier else None
    for name in MANAGER_ENV:
        env.pop(name, None)
    return notifier, watchdog


class SystemdReporter:
    """A Reporter: `STATUS=` on every change, `READY=1` once the run's outcome is known."""

    def __init__(self, notifier: Notifier) -> None:
        self.notifier = notifier
        self._last_status = ""

    def publish(self, conditions: list[Condition], final: bool) -> None:
        status = status_line(conditions, final)
        lines = [f"STATUS={status}"] if status != self._last_status else []
        if final:
            lines.append("READY=1")
        if lines:
            self.notifier.send(*lines)
            self._last_status = status


def status_line(conditions: list[Condition], final: bool) -> str:
    """One line for `systemctl status`: the outcome when final, else the phase at work."""
    phases = [c for c in conditions if c.type != SUMMARY]
    done = sum(c.status == "True" for c in phases)
    summary = next((c for c in conditions if c.type == SUMMARY), None)
    failed = next((c for c in phases if c.status == "False"), None)
    if final and failed is not None and summary is not None and summary.status == "False":
        # The phase's own condition names it and its reason; the summary only repeats it.
        return _one_line(f"bootstrap failed: {failed.type} False ({failed.reason}): "
                         f"{failed.message}")
    if final and summary is not None:
        word = {"True": "bootstrapped", "False": "failed"}.get(summary.status, "incomplete")
        return _one_line(f"{word}: {summary.reason}: {summary.message}")
    current = next((c for c in phases if c.status != "True"), None)
    if current is None:
        return f"{done}/{len(phases)} phases done"
    return _one_line(f"{done}/{len(phases)} phases done; {current.type}: {current.message}")


def _one_line(text: str, limit: int = 200) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


class Watchdog:
    """Sends `WATCHDOG=1` every `interval` seconds from its own thread until stopped.

    It proves the process is alive, not that the bootstrap advances: every wait in the
    phases is bounded by their configuration, which is what keeps a run from hanging.
    The unit sets no WatchdogSec= by default (an idle daemon makes no wake-ups); a site
    that wants one adds it in a drop-in, and this keepalive starts.
    """

    def __init__(self, notifier: Notifier, interval: float) -> None:
        self.notifier = notifier
        self.interval = interval
        self.stopped = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="watchdog", daemon=True)

    @classmethod
    def from_environment(cls, env: Mapping[str, str], notifier: Notifier) -> Watchdog | None:
        """Half the watchdog period systemd set, as sd_watchdog_enabled(3) advises."""
        try:
            usec = int(env.get("WATCHDOG_USEC", "0"))
            pid = int(env.get("WATCHDOG_PID", str(os.getpid())))
        except ValueError:
            return None
        if usec <= 0 or pid != os.getpid():
            return None
        return cls(notifier, usec / 2 / 1_000_000)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self.stopped.set()
        if self._thread.is_alive():
            self._thread.join()

    def _loop(self) -> None:
        while True:
            self.notifier.send("WATCHDOG=1")
            if self.stopped.wait(self.interval):
                return
