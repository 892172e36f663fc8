"""The kubelet's flags kept in place in kubeadm-flags.env: read as kubeadm writes them,
a flag set remembers what it replaced, and a change taken back leaves the line exactly
as kubeadm wrote it."""

from __future__ import annotations

import pytest

from agent.errors import PermanentError
from agent.phases.join.kubeletflags import KeptFlag, keep, parse, render

KUBEADM = ('KUBELET_KUBEADM_ARGS="--container-runtime-endpoint=unix:///var/run/containerd/'
           'containerd.sock --max-pods=110 --pod-infra-container-image=registry.k8s.io/'
           'pause:3.10"\n')


def test_a_change_and_its_rollback_leave_kubeadms_line_as_it_was() -> None:
    current = parse(KUBEADM)
    flags, kept = keep(current, {}, {"max-pods": "200", "eviction-hard": "memory.available<5%"})
    assert flags["max-pods"] == "200" and flags["eviction-hard"] == "memory.available<5%"
    assert kept == {"max-pods": KeptFlag("200", "110"),
                    "eviction-hard": KeptFlag("memory.available<5%", None)}
    changed = render(flags)
    assert changed.startswith('KUBELET_KUBEADM_ARGS="--container-runtime-endpoint=')
    back, kept_after = keep(parse(changed), kept, {})
    assert render(back) == KUBEADM and kept_after == {}


def test_a_second_change_keeps_the_value_kubeadm_wrote() -> None:
    flags, kept = keep(parse(KUBEADM), {}, {"max-pods": "200"})
    flags, kept = keep(flags, kept, {"max-pods": "300"})
    assert kept == {"max-pods": KeptFlag("300", "110")}
    assert render(keep(flags, kept, {})[0]) == KUBEADM


@pytest.mark.parametrize("text", [
    "KUBELET_KUBEADM_ARGS=--max-pods=1\n",  # not quoted
    'KUBELET_KUBEADM_ARGS="--max-pods=1"\nOTHER=1\n',  # more than kubeadm's line
    'KUBELET_KUBEADM_ARGS="--max-pods"\n',  # no value
])
def test_a_file_kubeadm_did_not_write_is_not_rewritten(text: str) -> None:
    with pytest.raises(PermanentError, match="kubeadm"):
        parse(text)


@pytest.mark.parametrize("value", ["1 --kubeconfig=/tmp/x", 'a"b', "a\nb", "a\u2028b"])
def test_the_renderer_refuses_a_value_that_would_split_or_end_the_line(value: str) -> None:
    with pytest.raises(PermanentError, match="max-pods"):
        render({"max-pods": value})


def test_flags_the_kubelet_reads_only_at_registration_are_never_changed_in_place() -> None:
    current = parse(KUBEADM)
    flags, kept = keep(current, {}, {"node-labels": "tier=b", "register-with-taints":
                                     "a=b:NoSchedule", "hostname-override": "other"})
    assert flags == current and kept == {}
