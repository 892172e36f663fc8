"""The network phase: try, check, then keep — or roll back to the exact state before.

apply: claim IPAM addresses, diff the namespace against the plan, change only the
difference (links, then addresses after an ARP probe / with DAD, then routes), prove the
result on the wire (gateway neighbour resolution, TCP to the management endpoint), and
only then write the persistent files. Any failure on the way restores the snapshot
taken before the first change: a node must never lock itself out.

Live changes are made only on the real root (`--root /`) or in a named namespace
(`Host.netns`): an image tree or the demo's sandbox gets the rendered files alone.
"""

from __future__ import annotations

import contextlib
import ipaddress
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

from agent.config.network import CLOUD_INIT, NetworkSpec
from agent.errors import AgentError, PermanentError, Reason, TemporaryError
from agent.host import Host
from agent.netlink.observe import Observed, kernel_text, links, observe
from agent.netlink.probe import arp_conflicts, dad_failures
from agent.netlink.rtnl import ChangeWatch, connect, watch
from agent.phases.base import Change, PhaseContext, PhaseOf, PhasePlan, file_change
from agent.phases.facts import NodeAddresses
from agent.phases.network.apply import Diff, Executor, NetOp, forward, rollback
from agent.phases.network.claims import claim_addresses, held_allocations
from agent.phases.network.live import is_live
from agent.phases.network.match import resolve_names
from agent.phases.network.model import NetworkPlan, build_plan
from agent.phases.network.render import (
    NETPLAN_FILE,
    NETWORKD_DIR,
    link_files_owned,
    render_cloud_init_dropin,
    render_dns,
    render_hostname,
    render_links,
)
from agent.phases.network.result import ClaimedAddress, NetworkResult
from agent.phases.network.verify import (
    gateway_resolves,
    management_accepts,
    management_endpoint,
)
from agent.recordtype import record

if TYPE_CHECKING:
    from agent.netlink.rtnl import Rtnl
    from agent.phases.checks import Check, Doctor

ROLLBACK_ROUNDS = 4
"""Rollback re-observes after each round: the kernel drops routes with their address."""


class AddressConflict(PermanentError):
    reason = Reason.AddressConflict


@record(frozen=True)
class _Planned:
    """The plan's diff, what it was computed from, and a change watch opened before its
    snapshot was taken."""

    netplan: NetworkPlan
    dad: bool
    snapshot: Observed
    names: dict[str, str]
    diff: Diff
    watch: ChangeWatch

    def reusable_for(self, netplan: NetworkPlan, dad: bool) -> bool:
        """Whether apply may start from this: the same plan, and no link, address or route
        of the namespace changed since the snapshot. The watch hears only deletions
        from then on (apply's, for verify)."""
        quiet = not self.watch.only_deletions()
        return quiet and (self.netplan, self.dad) == (netplan, dad)


class NetworkPhase(PhaseOf[NetworkResult]):
    name = "network"
    condition = "NetworkReady"
    success = Reason.NetworkConfigured
    provides = (NodeAddresses,)
    Result = NetworkResult
    reconfigurable = True

    def doctor_checks(self, doctor: Doctor) -> Iterator[Check]:
        from agent.phases.network.doctor import checks  # only `doctor` asks: not in a run

        return checks(self, doctor)

    def __init__(self) -> None:
        self._result = NetworkResult()
        self._planned: _Planned | None = None
        """The plan's snapshot and diff, for apply to start from when nothing changed."""
        self._deletions: ChangeWatch | None = None
        """Listening from before apply's first change to verify: when it heard no link or
        address deleted, every address the kernel acknowledged (or that was there) is
        still there, and verify reads nothing back."""
        self._rtnl: Rtnl | None = None
        """The run's netlink socket: opened by plan, used by apply and verify, closed when
        verify ends or apply fails (a retry plans, and opens one, again)."""

    def _netlink(self, host: Host) -> Rtnl:
        if self._rtnl is None:
            self._rtnl = connect(host)
        return self._rtnl

    def _close(self) -> None:
        self._forget_plan()
        if self._deletions is not None:
            self._deletions.close()
            self._deletions = None
        if self._rtnl is not None:
            self._rtnl.close()
            self._rtnl = None

    def _forget_plan(self) -> None:
        if self._planned is not None:
            self._planned.watch.close()
            self._planned = None

    # -- plan -------------------------------------------------------------------------

    def plan(self, ctx: PhaseContext) -> PhasePlan:
        spec = ctx.config.spec.network
        out = PhasePlan(self.name)
        netplan = build_plan(spec, held_allocations(ctx, spec))
        out.notes += [str(claim) for claim in netplan.pending]
        if spec.interfaces and is_live(ctx.host):
            self._forget_plan()
            rtnl = self._netlink(ctx.host)
            changes = watch(ctx.host)  # before the dump: any change after it is seen
            try:
                now = observe(rtnl)
                names = resolve_names(ctx.host, netplan, now)
                dad = spec.conflict_detection.duplicate_address_detection
                diff = forward(netplan, now, names, dad=dad)
            except BaseException:
                changes.close()
                raise
            self._planned = _Planned(netplan, dad, now, names, diff, changes)
            out.changes += [Change(f"netlink:{op}", str(op), _single(op)) for op in diff.ops]
        elif spec.interfaces:
            out.notes.append("no live change: the host root is not / and no network "
                             "namespace is named; only the persistent files are written")
        out.changes += persistent_changes(ctx.host, spec, netplan)
        return out

    # -- apply ------------------------------------------------------------------------

    def apply(self, ctx: PhaseContext, plan: PhasePlan) -> None:
        try:
            self._apply(ctx)
        except BaseException:
            self._close()
            raise

    def _apply(self, ctx: PhaseContext) -> None:
        spec = ctx.config.spec.network
        claimed = claim_addresses(ctx, spec)
        netplan = build_plan(spec, claimed)
        live = bool(spec.interfaces) and is_live(ctx.host)
        self._result = NetworkResult(
            live=live, renderer=spec.renderer,
            addresses={link.name: [str(a) for a in link.addresses]
                       for link in netplan.links if link.addresses},
            # what `status` shows; the journal's IPAM ledger holds what `reset` releases
            claimed=[ClaimedAddress(iface, f"{a.address}/{a.prefix}", a.gateway, a.backend,
                                    a.handle) for (iface, _), a in sorted(claimed.items())])
        if live:
            # Not journaled as a step: the next attempt diffs the kernel afresh, so the
            # record was read by nothing, and its save cost an fsync (0.5-2.5 ms).
            self._apply_live(ctx, spec, netplan, self._result)
        written = []
        for change in persistent_changes(ctx.host, spec, netplan):
            ctx.log.info("%s", change.summary)
            change.action(ctx.host)
            ctx.journal.step_done(self.name, change.key)
            written.append(change.summary)
        self._result.files = written

    def _apply_live(self, ctx: PhaseContext, spec: NetworkSpec, netplan: NetworkPlan,
                    result: NetworkResult) -> None:
        host = ctx.host
        rtnl = self._netlink(host)
        before, names, diff = self._forward(
            host, rtnl, netplan, spec.conflict_detection.duplicate_address_detection)
        executor = Executor(host, rtnl, before.links)
        try:
            executor.run(diff.links)
            self._probe_and_add(ctx, spec, rtnl, executor, diff.addresses,
                                diff.new_ipv4(), netplan)
            executor.run(diff.routes)
            result.gateways, result.management = self._check_on_the_wire(
                ctx, spec, rtnl, netplan, names)
        except BaseException as err:
            if executor.count:
                self._rollback(ctx, rtnl, before, set(names.values()), err)
            raise
        result.netlink_changes = executor.count

    def _forward(self, host: Host, rtnl: Rtnl, netplan: NetworkPlan,
                 dad: bool) -> tuple[Observed, dict[str, str], Diff]:
        """The snapshot apply starts from (and rolls back to), and the names and forward
        diff of `netplan` against it: the plan's, when it was made for the same plan and
        the kernel reported no change of a link, address or route since its snapshot
        (every attempt plans right before it applies, so this spares the run a dump of
        the namespace and the diff); else taken afresh. Either way, the deletion watch
        verify reads is listening before the first change."""
        planned, self._planned = self._planned, None
        if self._deletions is not None:
            self._deletions.close()
        if planned is not None:
            self._deletions = planned.watch
            if planned.reusable_for(netplan, dad):
                return planned.snapshot, planned.names, planned.diff
        else:
            self._deletions = watch(host)
            self._deletions.only_deletions()
        before = observe(rtnl)
        names = resolve_names(host, netplan, before)
        return before, names, forward(netplan, before, names, dad=dad)

    def _probe_and_add(self, ctx: PhaseContext, spec: NetworkSpec, rtnl: Rtnl,
                       executor: Executor, ops: list[NetOp],
                       new_ipv4: list[tuple[str, str]], netplan: NetworkPlan) -> None:
        clock, timing = ctx.host.clock, spec.conflict_detection
        if new_ipv4 and timing.arp_probes:
            # the links' MACs, those made a moment ago too: links only, not a snapshot
            macs = {state.name: state.mac for state in links(rtnl)}
            ctx.progress(f"probing {len(new_ipv4)} IPv4 address(es) for conflicts (ARP)")
            candidates = [(link, macs[link], ip) for link, ip in new_ipv4 if link in macs]
            taken = arp_conflicts(ctx.host, candidates, timing, clock.monotonic)
            if taken:
                raise AddressConflict(
                    f"{', '.join(sorted(taken))} already answered on the segment (ARP probe, "
                    "RFC 5227); the address was not configured")
        executor.run(ops)  # without DAD, the diff's IPv6 additions carry IFA_F_NODAD
        if not timing.duplicate_address_detection:
            return
        v6_ops = [op for op in ops if op.what == "addr-add" and ":" in dict(op.params)["address"]]
        new_v6 = [(executor.index_of(op.link), dict(op.params)["address"]) for op in v6_ops]
        if new_v6:
            ctx.progress(f"waiting for duplicate address detection of {len(new_v6)} "
                         "IPv6 address(es)")
            timeout = float(timing.dad_timeout) + netplan.carrier_delay(
                op.link for op in v6_ops)
            failed = dad_failures(rtnl, new_v6, timeout, clock.monotonic, clock.sleep)
            if failed:
                raise AddressConflict(
                    f"{', '.join(sorted(failed))} failed IPv6 duplicate address detection "
                    f"(dadfailed or still tentative after {timeout:g}s)")

    def _check_on_the_wire(self, ctx: PhaseContext, spec: NetworkSpec, rtnl: Rtnl,
                           netplan: NetworkPlan, names: dict[str, str]
                           ) -> tuple[list[str], str | None]:
        clock, timeout = ctx.host.clock, float(spec.verify.timeout)
        gateways = []
        # a link-local gateway is asked for on its link: its index, read once
        now = observe(rtnl, routes=False) if any(
            ipaddress.ip_address(gw).is_link_local for _, gw in netplan.gateways) else None
        for link, gateway in netplan.gateways:
            ctx.progress(f"checking that gateway {gateway} answers on {link}")
            wait = timeout + netplan.carrier_delay([link])
            state = now.link(names[link]) if now is not None else None
            if not gateway_resolves(ctx.host, rtnl, gateway, wait, clock.monotonic,
                                    clock.sleep, state.index if state is not None else 0):
                raise TemporaryError(
                    f"gateway {gateway} on {link} did not answer neighbour resolution "
                    f"within {wait:g}s; the network change was rolled back",
                    reason=Reason.GatewayUnreachable)
            gateways.append(gateway)
        endpoint = management_endpoint(ctx.config)
        reached = None
        if endpoint is not None:
            ctx.progress(f"checking that the management endpoint {endpoint[0]}:{endpoint[1]} "
                         "accepts a connection")
            try:
                reached = management_accepts(ctx.host, endpoint, timeout, clock.monotonic,
                                             clock.sleep)
            except AgentError as err:
                err.message += "; the network change was rolled back"
                raise
            reached = f"{reached}:{endpoint[1]}"
        return gateways, reached

    def _rollback(self, ctx: PhaseContext, rtnl: Rtnl, before: Observed,
                  names: set[str], cause: BaseException) -> None:
        ctx.log.warning("rolling back the network change (%s)", cause)
        for _ in range(ROLLBACK_ROUNDS):
            now = observe(rtnl)
            ops = rollback(before, now, names)
            if not ops:
                break
            Executor(ctx.host, rtnl, now.links).run(ops, tolerant=True)
        after = observe(rtnl)
        if after.restricted(names) != before.restricted(names):
            ctx.log.error("rollback left a difference: before %s, after %s",
                          before.restricted(names), after.restricted(names))

    def still_holds(self, ctx: PhaseContext, result: NetworkResult) -> bool:
        """Nothing to change: the plan against the node as it is now (the kernel's links,
        addresses and routes, the written files) is empty, so a run repairs whatever a
        plan would report. One netlink dump and the files' reads."""
        try:
            return not self.plan(ctx).changes
        except AgentError:
            return False  # the run plans again and reports it
        finally:
            self._close()

    # -- verify -----------------------------------------------------------------------

    def verify(self, ctx: PhaseContext, plan: PhasePlan) -> NetworkResult:
        spec = ctx.config.spec.network
        if self._result.live:
            netplan = build_plan(spec)
            try:
                deletions = self._deletions
                if deletions is not None and not deletions.changed():
                    return self._result
                now = observe(self._netlink(ctx.host), routes=False)
            finally:
                self._close()
            names = resolve_names(ctx.host, netplan, now)
            missing = [f"{link.name}: {a}" for link in netplan.links
                       for have in [now.addresses_of(names[link.name])]
                       for a in link.addresses if kernel_text(a) not in have]
            if missing:
                raise TemporaryError(f"addresses went missing after apply: {missing}",
                                     reason=Reason.InProgress)
        return self._result

    def message(self, result: NetworkResult) -> str:
        count = sum(len(a) for a in result.addresses.values())
        parts = [f"{count} address{'es' if count != 1 else ''} on "
                 f"{len(result.addresses)} interface(s)"]
        if result.gateways:
            parts.append(f"gateway {', '.join(result.gateways)} answers")
        if result.management:
            parts.append(f"management endpoint {result.management} reachable")
        if not result.live:
            parts.append("persistent configuration only (no live change)")
        return "; ".join(parts)


def _single(op: NetOp) -> Callable[[Host], None]:
    def run(host: Host) -> None:
        with contextlib.closing(connect(host)) as rtnl:
            Executor(host, rtnl).run([op])
    return run


def persistent_changes(host: Host, spec: NetworkSpec, netplan: NetworkPlan) -> list[Change]:
    """Writes of the rendered files that differ, and removals of files an earlier run
    rendered for interfaces no longer configured."""
    files = render_links(netplan, spec.renderer)
    files.update(render_dns(netplan, spec.dns.backend, spec.renderer))
    files.update(render_hostname(netplan, host.read_text("/etc/hosts")))
    # The datasource's own document: cloud-init must keep finding it (network-config.json
    # is written only while its network configuration is on), so it is never disabled.
    if spec.disable_cloud_init_network and spec.interfaces and spec.renderer != "none" \
            and spec.network_config_from != CLOUD_INIT:
        files.update(render_cloud_init_dropin())
    changes = [c for path, content in files.items()
               if (c := file_change(host, path, content,
                                    mode=0o600 if path == NETPLAN_FILE else 0o644))]
    for stale in link_files_owned(spec.renderer, host.list_dir(NETWORKD_DIR)):
        if stale not in files:
            changes.append(Change(f"remove:{stale}", f"remove {stale} (interface no longer "
                                  "configured)", _remover(stale)))
    return changes


def _remover(path: str) -> Callable[[Host], None]:
    def remove(host: Host) -> None:
        host.remove(path)
    return remove

