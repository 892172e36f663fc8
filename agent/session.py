"""What a command runs with: the configuration chain, the Machine (when
`spec.management` is set) and the reporters — composed here so the CLI stays thin.

With a management cluster, the local sources are read first (they say how to reach it
and which Machine this is), then the Machine and what it points at, and the
configuration is loaded again with the Machine's ConfigMap or Secret on top.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import field, replace

from agent.config import LoadedConfig, default_sources, load_config
from agent.config.sources.chain import Source
from agent.errors import ConfigError
from agent.host import Host
from agent.ipam.settings import plugin_problems
from agent.kube.client import Client
from agent.kube.credentials import store_credentials
from agent.kube.facts import MachineFacts
from agent.kube.kubeconfig import load_credentials
from agent.kube.machine import BootstrapDataMissing, MachineReader, MachineView
from agent.kube.machine_config import ManagementSource
from agent.kube.reporter import MachineReporter
from agent.logs import set_context
from agent.orchestrator import Orchestrator
from agent.phases import registry
from agent.phases.base import Phase
from agent.recordtype import record
from agent.report import LocalStatus, Sentinel
from agent.report.metrics import MetricsTextfile
from agent.retry import Backoff, retry

log = logging.getLogger(__name__)


def load(host: Host, sources: Iterable[Source]) -> LoadedConfig:
    """The configuration, also checked by what sits above the model: the phases (their
    names in spec.skipPhases and spec.lifecycle.reconfigure, a plugin phase's settings)
    and the installed IPAM plugins (their settings and pools)."""
    phases = registry.load()
    return load_config(host, sources,
                       [lambda c: registry.config_problems(c, phases), plugin_problems])


@record
class Session:
    loaded: LoadedConfig
    machine: MachineView | None = None
    client: Client | None = None
    local_sources: list[Source] = field(default_factory=list)
    """The node's own sources, without the Machine's configuration (the daemon loads
    them again with a changed ConfigMap or Secret on top)."""

    def with_machine_config(self, host: Host, config: ManagementSource | None) -> Session:
        """This session with the Machine's configuration replaced by `config` (as the
        daemon's watch saw it change); ConfigError when the result is invalid."""
        sources = [*self.local_sources, config] if config is not None else self.local_sources
        machine = replace(self.machine, config=config) if self.machine else None
        return Session(load(host, sources), machine, self.client, self.local_sources)

    def orchestrator(self, host: Host, *, reporting: bool = True,
                     phases: list[Phase] | None = None,
                     background_delivery: bool = False) -> Orchestrator:
        """The orchestrator for this configuration and Machine (and `phases`, default
        all); with `reporting`, its reporters: the local status file, CABPK's sentinel,
        the Machine's status. `background_delivery` (the daemon): the final report is
        tried once, then retried in the background until delivered, instead of holding
        the caller up."""
        facts = self.machine.facts if self.machine else None
        orchestrator = Orchestrator(self.loaded, host, machine=facts, phases=phases,
                                    management=self.client,
                                    reload_machine=(lambda: self.read_machine_again(host))
                                    if self.machine is not None and self.client is not None
                                    else None)
        if not reporting:
            return orchestrator
        spec = self.loaded.config.spec.reporting
        orchestrator.reporters.append(LocalStatus(host))
        if spec.metrics_textfile:  # after LocalStatus: it reads the timeline just written
            orchestrator.reporters.append(MetricsTextfile(
                host, orchestrator.journal, {p.condition: p.name for p in orchestrator.phases},
                spec.metrics_textfile))
        if spec.sentinel:
            orchestrator.reporters.append(Sentinel(host))
        if self.machine is not None and self.client is not None and (
                spec.conditions or spec.events):
            # The reporter keeps undelivered reports in the orchestrator's own journal
            # (one journal object, one writer of the file).
            orchestrator.reporters.append(MachineReporter(
                self.client, self.machine, orchestrator.journal, host=host,
                conditions=spec.conditions, events=spec.events,
                final_attempts=1 if background_delivery else 8,
                keep_trying=background_delivery))
        return orchestrator

    def read_machine_again(self, host: Host) -> MachineFacts:
        """The Machine and its bootstrap data as they are now (e.g. a rotated bootstrap
        token); no wait: the Secret was there when the session began."""
        assert self.client is not None
        reader = MachineReader(self.client, host, wait=0.0, monotonic=host.clock.monotonic)
        return reader.read(self.loaded.config.spec.identity).facts


class MachineConfigInvalid(ConfigError):
    """The node's own sources are valid; the Machine's ConfigMap or Secret makes the
    configuration invalid. `session` is the one without it (its Machine and client), so
    the daemon can report on the Machine and wait for the object to be fixed."""

    def __init__(self, err: ConfigError, session: Session) -> None:
        super().__init__(err.errors)
        self.session = session


def open_session(host: Host, files: Iterable[str] = (), *,
                 wait_for_bootstrap: bool = True,
                 cloud_init_wait: float | None = None) -> Session:
    """Load the configuration; with spec.management, read the Machine and add its
    configuration. `wait_for_bootstrap=False` (plan, config show) does not wait for the
    bootstrap data to appear; `cloud_init_wait` bounds the wait for cloud-init."""
    sources = list(default_sources(files, cloud_init_wait=cloud_init_wait))
    local = load(host, sources)
    spec = local.config.spec
    if not spec.management.configured:
        return Session(local)
    client = Client(load_credentials(store_credentials(spec.management, host), host),
                    timeout=float(spec.management.request_timeout), sleep=host.clock.sleep)
    reader = MachineReader(client, host,
                           wait=float(spec.management.bootstrap_wait)
                           if wait_for_bootstrap else 0.0,
                           progress=lambda message: log.info("%s", message),
                           monotonic=host.clock.monotonic)
    backoff = Backoff(spec.retry.initial_delay, spec.retry.max_delay, spec.retry.attempts)

    def read() -> MachineView | BootstrapDataMissing:
        try:
            return reader.read(spec.identity)
        except BootstrapDataMissing as err:
            return err  # waited spec.management.bootstrapWait already: not once per retry

    outcome = retry(read, backoff, sleep=host.clock.sleep,
                    on_retry=lambda err, n, pause: log.warning(
                        "reading the Machine failed (%s); retrying in %.1fs", err, pause))
    if isinstance(outcome, BootstrapDataMissing):
        raise outcome
    machine = outcome
    # Every later log line names the Machine (the journal's MACHINE= field).
    set_context(machine=f"{machine.facts.namespace}/{machine.facts.name}")
    if machine.config is None:
        return Session(local, machine, client, sources)
    try:
        loaded = load(host, [*sources, machine.config])
    except ConfigError as err:
        raise MachineConfigInvalid(err, Session(local, machine, client, sources)) from err
    return Session(loaded, machine, client, sources)
