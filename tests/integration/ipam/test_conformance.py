"""One conformance suite that every IPAM plugin passes: idempotent claims, distinct
addresses under concurrency, exhaustion without leftovers, release, dual stack, and the
error reasons for bad credentials and an unavailable backend."""

from __future__ import annotations

import ipaddress
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from agent.errors import Reason
from agent.ipam.base import (
    Allocation,
    ClaimRequest,
    IPAMUnauthorized,
    IPAMUnavailable,
    PoolExhausted,
)
from agent.retry import Backoff, retry
from tests.integration.ipam.backends import (
    Harness,
    capi_harness,
    nautobot_harness,
    netbox_harness,
    static_harness,
)

BACKENDS = ("static", "netbox", "nautobot", "capi")


@pytest.fixture(params=BACKENDS)
def harness(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Harness]:
    name = request.param
    if name == "static":
        made = static_harness(tmp_path)
    elif name == "netbox":
        made = netbox_harness(tmp_path, request.getfixturevalue("netbox"))
    elif name == "nautobot":
        made = nautobot_harness(tmp_path, request.getfixturevalue("nautobot"))
    else:
        made = capi_harness(tmp_path, request.getfixturevalue("management"))
    yield made
    for undo in made.cleanup:
        undo()


def req(harness: Harness, key: str, case: str = "v4", family: str = "ipv4") -> ClaimRequest:
    return ClaimRequest(claim_key=f"uid-1234/{key}", pool=harness.pools[case],
                        family=family, interface="eth0",  # type: ignore[arg-type]
                        machine_namespace="default", machine_name="worker-0")


def assert_usable(alloc: Allocation) -> None:
    iface = ipaddress.ip_interface(f"{alloc.address}/{alloc.prefix}")
    assert alloc.gateway is None or ipaddress.ip_address(alloc.gateway) in iface.network
    assert alloc.handle


def test_same_key_twice_gets_the_same_address(harness: Harness) -> None:
    plugin = harness.plugin()
    first = plugin.claim(req(harness, "eth0/ipv4"))
    again = harness.plugin().claim(req(harness, "eth0/ipv4"))  # a new process, same key
    assert_usable(first)
    assert (again.address, again.prefix, again.gateway) == (first.address, first.prefix,
                                                            first.gateway)


def test_different_keys_get_different_addresses(harness: Harness) -> None:
    plugin = harness.plugin()
    a = plugin.claim(req(harness, "a/eth0/ipv4"))
    b = plugin.claim(req(harness, "b/eth0/ipv4"))
    assert a.address != b.address


def test_twenty_parallel_claims_get_twenty_distinct_addresses(harness: Harness) -> None:
    plugin = harness.plugin()
    with ThreadPoolExecutor(max_workers=20) as pool:
        allocs = list(pool.map(lambda i: plugin.claim(req(harness, f"node-{i}/eth0/ipv4")),
                               range(20)))
    assert len({a.address for a in allocs}) == 20
    with ThreadPoolExecutor(max_workers=10) as pool:  # the same keys again, in parallel
        again = list(pool.map(lambda i: plugin.claim(req(harness, f"node-{i}/eth0/ipv4")),
                              range(20)))
    assert [a.address for a in again] == [a.address for a in allocs]


def test_exhaustion_is_reported_and_leaves_nothing_half_created(harness: Harness) -> None:
    plugin = harness.plugin()
    held = [plugin.claim(req(harness, f"n{i}", "small")) for i in range(harness.small_size)]
    assert len({a.address for a in held}) == harness.small_size
    with pytest.raises(PoolExhausted) as info:
        plugin.claim(req(harness, "one-too-many", "small"))
    assert info.value.reason == Reason.PoolExhausted
    assert harness.pools["small"] in str(info.value)
    plugin.release(held[0])
    freed = plugin.claim(req(harness, "one-too-many", "small"))
    assert freed.address == held[0].address  # the failed claim left no stale reservation


def test_release_then_claim_makes_the_address_available_again(harness: Harness) -> None:
    plugin = harness.plugin()
    first = plugin.claim(req(harness, "gone/eth0/ipv4"))
    plugin.release(first)
    plugin.release(first)  # releasing twice is not an error
    others = {plugin.claim(req(harness, f"other-{i}")).address for i in range(3)}
    assert first.address in others


def test_each_change_on_the_backend_is_a_side_effect_counted_right_after_it(
        harness: Harness, monkeypatch: pytest.MonkeyPatch) -> None:
    """The crash harness kills the agent right after a counted side effect: an address
    claimed or released on the backend must be one (a kill there leaves a claim the
    journal does not know yet), finding the same claim again or releasing twice none."""
    effects = harness.env.host.effects
    held_when_counted: list[int] = []
    if harness.held is not None:
        held, record = harness.held, effects.record
        monkeypatch.setattr(effects, "record", lambda what: (
            held_when_counted.append(held()), record(what)))
    before = harness.held() if harness.held is not None else 0
    plugin = harness.plugin()
    counted = effects.count
    first = plugin.claim(req(harness, "counted/eth0/ipv4"))
    assert effects.count > counted
    if harness.held is not None:  # counted once the backend holds it, not before
        assert held_when_counted[-1] == before + 1, held_when_counted
    counted = effects.count
    harness.plugin().claim(req(harness, "counted/eth0/ipv4"))
    assert effects.count == counted
    plugin.release(first)
    assert effects.count > counted
    counted = effects.count
    plugin.release(first)
    assert effects.count == counted


def test_dual_stack_one_ipv4_and_one_ipv6_per_interface(harness: Harness) -> None:
    plugin = harness.plugin()
    v4 = plugin.claim(req(harness, "eth0/ipv4", "v4", "ipv4"))
    v6 = plugin.claim(req(harness, "eth0/ipv6", "v6", "ipv6"))
    assert ipaddress.ip_address(v4.address).version == 4 and v4.family == "ipv4"
    assert ipaddress.ip_address(v6.address).version == 6 and v6.family == "ipv6"
    assert_usable(v6)


@pytest.mark.parametrize("harness", ["netbox", "nautobot", "capi"], indirect=True)
def test_bad_credentials_are_ipam_unauthorized(harness: Harness) -> None:
    assert harness.bad_credentials is not None
    with pytest.raises(IPAMUnauthorized) as info:
        harness.bad_credentials().claim(req(harness, "eth0/ipv4"))
    assert info.value.reason == Reason.IPAMUnauthorized and not info.value.temporary


@pytest.mark.parametrize("harness", ["netbox", "nautobot", "capi"], indirect=True)
def test_backend_down_is_retried_and_succeeds_when_it_returns(harness: Harness) -> None:
    assert harness.outage is not None
    plugin = harness.plugin()
    outage = harness.down()
    outage.__enter__()
    try:
        with pytest.raises(IPAMUnavailable) as info:
            plugin.claim(req(harness, "eth0/ipv4"))
        assert info.value.temporary and info.value.reason == Reason.IPAMUnavailable
    except BaseException:
        outage.__exit__(None, None, None)
        raise
    pauses: list[float] = []

    def back_up(pause: float) -> None:
        if not pauses:
            outage.__exit__(None, None, None)
        pauses.append(pause)

    first = retry(lambda: plugin.claim(req(harness, "eth0/ipv4")), Backoff(0.01, 0.01, 3),
                  sleep=back_up)
    assert_usable(first)
    assert len(pauses) == 1  # failed while down, succeeded once it was back
    assert plugin.claim(req(harness, "eth0/ipv4")).address == first.address


@pytest.mark.parametrize("harness", ["netbox", "nautobot", "capi"], indirect=True)
def test_slow_backend_times_out_as_temporary_then_succeeds_when_fast_again(
        harness: Harness) -> None:
    """Answers four times slower than the plugin's request time-out: the claim gives up
    within its time-out (not the backend's delay) with a temporary IPAMUnavailable; the
    agent's retry succeeds once the backend is fast again, and the requests the backend
    finished after the plugin gave up leave no second address or claim."""
    assert harness.slow is not None and harness.impatient is not None \
        and harness.held is not None
    plugin, delay = harness.impatient(), 4 * harness.patience
    slowness = harness.slow(delay)
    slowness.__enter__()
    try:
        started = time.monotonic()
        with pytest.raises(IPAMUnavailable) as info:
            plugin.claim(req(harness, "eth0/ipv4"))
        took = time.monotonic() - started
        assert info.value.temporary and info.value.reason == Reason.IPAMUnavailable
        assert harness.name in str(info.value) and "Timeout" in str(info.value)
        assert took < delay, f"the claim waited {took:.1f}s, the backend's whole delay"
    except BaseException:
        slowness.__exit__(None, None, None)
        raise
    pauses: list[float] = []

    def fast_again(pause: float) -> None:
        if not pauses:
            slowness.__exit__(None, None, None)
            time.sleep(delay)  # the slow requests still in flight land meanwhile
        pauses.append(pause)

    first = retry(lambda: plugin.claim(req(harness, "eth0/ipv4")), Backoff(0.01, 0.01, 4),
                  sleep=fast_again)
    assert_usable(first)
    assert pauses  # timed out while slow, succeeded once fast again
    assert plugin.claim(req(harness, "eth0/ipv4")).address == first.address
    assert harness.held() == 1
