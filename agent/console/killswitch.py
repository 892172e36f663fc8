"""The kill switch, as the unit's conditions read it: `/etc/machine-agent/disabled`, or
the word `machine-agent.disabled` on the kernel command line. With either, systemd never
starts the agent, so no run will come (`status --wait` says so at once)."""

from __future__ import annotations

from agent.host import Host

DISABLED_FILE = "/etc/machine-agent/disabled"
CMDLINE_WORD = "machine-agent.disabled"
CMDLINE = "/proc/cmdline"


def disabled_by(host: Host) -> str | None:
    """What disables the agent on this host, in words; None when nothing does."""
    if host.exists(DISABLED_FILE):
        return f"{DISABLED_FILE} exists"
    try:
        cmdline = host.read_text(CMDLINE) or ""
    except (OSError, UnicodeDecodeError):
        cmdline = ""
    # ConditionKernelCommandLine= (systemd.unit(5)): a word without `=` matches the word
    # itself or the left side of an assignment.
    if any(w == CMDLINE_WORD or w.startswith(CMDLINE_WORD + "=") for w in cmdline.split()):
        return f"the kernel command line has {CMDLINE_WORD}"
    return None
