"""The daemon's watches: its Machine and the AgentConfig object the Machine names, each
followed from its own thread (agent.kube.follow), their updates put on the daemon's
queue. Each has its own client (and so its own connection), whose retry pauses end as
soon as the watches are stopped."""

from __future__ import annotations

import threading
from collections.abc import Callable

from agent.kube.client import Client, resource_path
from agent.kube.follow import Follower, Recovered, Update
from agent.kube.machine import GROUP, MachineView
from agent.kube.machine_config import ConfigRef

MACHINE = "machine"
CONFIG = "config"


class Watches:
    def __init__(self, client: Client, machine: MachineView,
                 put: Callable[[Update | Recovered], None]) -> None:
        self.creds, self.timeout = client.creds, client.timeout
        self.machine = machine
        self.put = put
        self.config_ref: ConfigRef | None = None
        self._followers: dict[str, Follower] = {}

    def start(self, config_ref: ConfigRef | None) -> None:
        facts = self.machine.facts
        self._follow(MACHINE, resource_path(GROUP, self.machine.version, "machines",
                                            namespace=facts.namespace), facts.name)
        self.follow_config(config_ref)

    def follow_config(self, ref: ConfigRef | None) -> None:
        """Follow `ref` (None: nothing) instead of the object followed so far."""
        if ref == self.config_ref:
            return
        old = self._followers.pop(CONFIG, None)
        if old is not None:
            old.stop()
        self.config_ref = ref
        if ref is not None:
            self._follow(CONFIG, ref.collection_path, ref.name)

    def stop(self) -> None:
        followers = list(self._followers.values())
        for follower in followers:  # all connections shut down first, then the waits
            follower.stopped.set()
        for follower in followers:
            follower.stop()

    def _follow(self, source: str, path: str, name: str) -> None:
        stopped = threading.Event()

        def pause(seconds: float) -> None:
            stopped.wait(seconds)

        client = Client(self.creds, timeout=self.timeout, sleep=pause)
        follower = Follower(client, path, name, source, self.put, stopped=stopped)
        self._followers[source] = follower.start()
