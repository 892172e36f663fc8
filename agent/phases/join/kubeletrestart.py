"""The kubelet restarted after its flags changed in place, and proven healthy: its healthz
endpoint answering `ok` (what kubeadm's kubelet-check asks, app/util/apiclient/wait.go),
twice a second apart, so a kubelet that starts and dies on a bad flag is not taken for a
healthy one. Otherwise the change fails (and a reconfiguration puts the previous flags
back: agent/daemon/reconfigure.py)."""

from __future__ import annotations

import http.client
import time
from collections.abc import Callable
from urllib.parse import urlsplit

from agent.config.join import JoinSpec
from agent.errors import PermanentError, Reason
from agent.host import Host

POLL = 1.0
"""Seconds between looks at healthz."""
HEALTHY_TIMES = 2


def healthz(url: str, timeout: float = 2.0) -> str:
    """The healthz answer: `ok`, or what it said instead (status or connection error)."""
    parts = urlsplit(url)
    conn = http.client.HTTPConnection(parts.hostname or "127.0.0.1", parts.port,
                                      timeout=timeout)
    try:
        conn.request("GET", parts.path or "/")
        answer = conn.getresponse()
        body = answer.read(200).decode(errors="replace").strip()
        return body if answer.status == 200 and body == "ok" else \
            f"HTTP {answer.status} {body[:80]!r}"
    except OSError as err:
        return f"no answer ({err.strerror or type(err).__name__})"
    finally:
        conn.close()


def restart_kubelet(host: Host, spec: JoinSpec, changed: str,
                    progress: Callable[[str], None], *,
                    fix: str = "an unknown flag or a bad value stops it); fix "
                               "nodeRegistration.kubeletExtraArgs") -> None:
    """Run the restart command, then wait until healthz answers `ok` HEALTHY_TIMES in a
    row (bounded by spec.kubeletRestartTimeout); `fix` ends the hint when it does not."""
    host.run(list(spec.kubelet_restart_command), timeout=90)
    url, limit = spec.kubelet_healthz, float(spec.kubelet_restart_timeout)
    start = time.monotonic()
    healthy, last = 0, "not asked"
    while time.monotonic() - start < limit:
        last = healthz(url)
        healthy = healthy + 1 if last == "ok" else 0
        if healthy >= HEALTHY_TIMES:
            return
        progress(f"waiting for the kubelet to answer healthy at {url} after its restart "
                 f"({time.monotonic() - start:.0f}s of {limit:g}s): {last}")
        time.sleep(POLL)
    raise PermanentError(
        f"the kubelet did not answer healthy at {url} within {limit:g}s of its restart with "
        f"{changed}: {last}", reason=Reason.KubeletNotHealthy,
        hint=f"read `journalctl -u kubelet` ({fix}")
