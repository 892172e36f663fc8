"""Command-line parsing only; every command calls into the rest of the agent.

Imports are deferred to the command that needs them, so `machine-agent --version` and
`--help` start fast on a node that is still booting.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from agent import __version__

if TYPE_CHECKING:
    from agent.config import LoadedConfig
    from agent.host import Host

EXIT_CODES = """\
exit status:
  0  done: every selected phase completed (or was already up to date)
  1  a phase failed permanently; the reason is on its condition (`machine-agent status`)
  2  the command line or the configuration is invalid; every problem is listed
  3  a phase failed temporarily and retries ran out; running again may succeed
"""

CRASH_AFTER_ENV = "MACHINE_AGENT_CRASH_AFTER"
"""Test hook: kill the process right after its Nth side effect (the crash harness)."""


def _parser() -> argparse.ArgumentParser:
    # The phase registry and the doctor's area names import no phase: --help stays fast.
    from agent.doctor.areas import area_names
    from agent.phases import registry

    phases = registry.names()
    doctor_areas = area_names(phases)
    parser = argparse.ArgumentParser(
        prog="machine-agent",
        description="Turns this machine into a node of a Cluster API cluster: configures "
                    "network and time, joins with kubeadm, installs the CNI, and reports "
                    "each step on the Machine's status.",
        epilog=EXIT_CODES, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--version", action="version", version=f"machine-agent {__version__}")
    parser.add_argument("--root", default="/", metavar="DIR",
                        help="directory that stands for / for every file the agent reads "
                             "or writes (default: /); point it at an image tree or a test "
                             "directory")
    parser.add_argument("--netns", metavar="NAME",
                        help="network namespace holding the node's links, changed live by "
                             "the network phase even when --root is not / (sandboxes, "
                             "tests); default: the agent's own namespace")
    parser.add_argument("--log-format", choices=("text", "json"), default="text",
                        help="text lines for a terminal, or JSON lines for journald")
    parser.add_argument("--log-level", choices=("debug", "info", "warning", "error"),
                        default="info")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    def with_config(p: argparse.ArgumentParser) -> None:
        p.add_argument("--config", "-c", action="append", default=[], metavar="FILE",
                       help="extra AgentConfig file, above the baked file, drop-ins, "
                            "cloud-init and the kernel command line (repeatable; later "
                            "wins)")
        p.add_argument("--cloud-init-wait", default="5m", metavar="DURATION",
                       help="how long to wait for cloud-init to finish its init stage "
                            "when it runs on this boot (default: 5m)")

    def with_selection(p: argparse.ArgumentParser) -> None:
        p.add_argument("--only", action="append", default=[], choices=phases, metavar="PHASE",
                       help="run only this phase (repeatable): " + ", ".join(phases))
        p.add_argument("--skip", action="append", default=[], choices=phases, metavar="PHASE",
                       help="leave this phase out (repeatable)")

    run = sub.add_parser("run", help="bootstrap the node: run the phases in order",
                         description="Plan, apply and verify each phase in order, "
                                     "journaling every step. Safe to run again: completed "
                                     "phases with unchanged inputs are skipped.",
                         epilog=EXIT_CODES, formatter_class=argparse.RawDescriptionHelpFormatter)
    with_config(run)
    with_selection(run)

    plan = sub.add_parser("plan", help="show what each phase would change, without changing it",
                          description="Print every change the phases would make, with "
                                      "diffs for files. Nothing is written or run.")
    with_config(plan)
    with_selection(plan)

    status = sub.add_parser(
        "status", help="show each phase's state from the journal",
        description="Show each phase's condition from the last run. With --wait, follow "
                    "the run in progress until its outcome is known (a finished run is "
                    "reported at once); exit 0 when the node is bootstrapped, 1 when not "
                    "or when the time-out passes first.")
    status.add_argument("--json", action="store_true", help="machine-readable output")
    status.add_argument("--wait", action="store_true",
                        help="block until the run's outcome is known, showing progress")
    status.add_argument("--timeout", type=float, default=1800.0, metavar="SECONDS",
                        help="with --wait: give up after this long (default: 1800)")

    daemon = sub.add_parser(
        "daemon", help="the systemd service: bootstrap, then stay until stopped",
        description="Run the phases like `run`, tell systemd (Type=notify: STATUS= per "
                    "phase, READY=1 once the outcome is known, WATCHDOG=1 when the unit "
                    "sets WatchdogSec=), then stay until SIGTERM. Exits 0 on SIGTERM, 2 "
                    "when the node's own configuration is invalid (a mistake in the "
                    "Machine's ConfigMap or Secret is reported on the Machine, and the "
                    "daemon waits for it to be fixed).")
    with_config(daemon)

    config = sub.add_parser("config", help="show or validate the configuration")
    config_sub = config.add_subparsers(dest="config_command", metavar="ACTION", required=True)
    show = config_sub.add_parser("show", help="the merged configuration, defaults included")
    show.add_argument("--origin", action="store_true",
                      help="say where each value came from (file, drop-in, default)")
    with_config(show)
    validate = config_sub.add_parser(
        "validate", help="check AgentConfig files offline; lists every error with its path")
    validate.add_argument("files", nargs="+", metavar="FILE")

    doctor = sub.add_parser(
        "doctor", help="diagnose the node read-only: every check with what was seen and the fix",
        description="Run the phases' own checks without changing anything and print one "
                    "line per check: PASS, WARN or FAIL, what was seen, and the fix "
                    "(docs/doctor.md lists every check and the --json format).",
        epilog="exit status:\n  0  every check passed (warnings allowed)\n  1  a check "
               "failed\n  2  doctor could not run (the root is missing, or a check broke)\n",
        formatter_class=argparse.RawDescriptionHelpFormatter)
    with_config(doctor)
    doctor.add_argument("--json", action="store_true", help="the stable JSON document")
    doctor.add_argument("--phase", action="append", default=[], metavar="NAME",
                        choices=doctor_areas,
                        help="show only this area (repeatable): " + ", ".join(doctor_areas))

    reset = sub.add_parser(
        "reset", help="give back the IPAM addresses this node claimed",
        description="Release every address the network phase claimed from an IPAM backend "
                    "(as recorded in the journal), so NetBox and other backends can hand "
                    "them out again. capi claims also go with the Machine when it is "
                    "deleted. Exit status 0 when every address was released.")
    with_config(reset)

    sub.add_parser("version", help="print the version")

    for command in _plugin_commands():
        command.add_parser(sub)
    return parser


COMMANDS_GROUP = "machine_agent.commands"
"""Entry points that add a command: the sandbox distribution adds `demo`. Each names an
object with `add_parser(subparsers)`, which sets `plugin_run` as the parser's default."""


def _plugin_commands() -> list[Any]:
    from importlib.metadata import entry_points

    return [ep.load() for ep in sorted(entry_points(group=COMMANDS_GROUP),
                                       key=lambda ep: ep.name)]


def main(argv: Sequence[str] | None = None) -> int:
    try:
        parser = _parser()
    except Exception as err:  # a phase plugin that cannot be loaded (agent.errors is
        from agent.errors import AgentError  # imported only now: it is slow for --help)

        if not isinstance(err, AgentError):
            raise
        print(f"machine-agent: {err}", file=sys.stderr)
        return 1
    args = parser.parse_args(argv)
    from agent.logs import setup_logging

    setup_logging(args.log_format, args.log_level)
    from agent.errors import AgentError, ConfigError

    try:
        return _dispatch(args)
    except ConfigError as err:
        print(f"machine-agent: {err}", file=sys.stderr)
        return 2
    except AgentError as err:
        print(f"machine-agent: {err}", file=sys.stderr)
        return 3 if err.temporary else 1


def _dispatch(args: argparse.Namespace) -> int:
    if args.command == "version":
        print(f"machine-agent {__version__}")
        return 0
    if hasattr(args, "plugin_run"):
        code: int = args.plugin_run(args)
        return code
    if args.command == "doctor":
        return _doctor(args)
    host = _host(args.root, args.netns)
    if args.command == "status" and args.wait:
        return _status_wait(host, as_json=args.json, timeout=args.timeout)
    if args.command == "status":
        return _status(host, as_json=args.json)
    if args.command == "daemon":
        return _daemon(host, args.config, _duration(args.cloud_init_wait))
    if args.command == "config":
        return _config(host, args)
    from agent.session import open_session

    session = open_session(host, [os.path.abspath(f) for f in args.config],
                           wait_for_bootstrap=args.command == "run",
                           cloud_init_wait=_duration(args.cloud_init_wait))
    if args.command == "plan":
        return _plan(session.orchestrator(host, reporting=False), args)
    if args.command == "reset":
        return _reset(host, session)
    result = session.orchestrator(host).run(args.only, args.skip)
    _print_outcomes(result)
    return result.exit_code


def _doctor(args: argparse.Namespace) -> int:
    from agent.doctor.registry import EXIT_NOT_RUN, diagnose, render_text
    from agent.host import Host

    if not os.path.isdir(args.root):
        print(f"machine-agent doctor: --root {args.root} is not a directory", file=sys.stderr)
        return EXIT_NOT_RUN
    diagnosis = diagnose(Host(args.root, netns=args.netns),
                         [os.path.abspath(f) for f in args.config], args.phase)
    if args.json:
        print(json.dumps(diagnosis.document(), indent=2))
    else:
        print(render_text(diagnosis))
    return diagnosis.exit_code


def _host(root: str, netns: str | None = None) -> Host:
    from agent.host import EffectLog, Host

    crash = os.environ.get(CRASH_AFTER_ENV)
    return Host(root, effects=EffectLog(crash_after=int(crash) if crash else None),
                netns=netns)


def _duration(text: str) -> float:
    from agent.config.fields import Duration
    from agent.errors import ConfigError, FieldError

    try:
        return float(Duration.parse(text))
    except ValueError as err:
        raise ConfigError([FieldError("--cloud-init-wait", str(err),
                                      origin="command line")]) from err


def _load(host: Host, args: argparse.Namespace) -> LoadedConfig:
    """The configuration chain, with the Machine's ConfigMap when spec.management is set."""
    from agent.session import open_session

    return open_session(host, [os.path.abspath(f) for f in args.config],
                        wait_for_bootstrap=False,
                        cloud_init_wait=_duration(args.cloud_init_wait)).loaded


def _plan(orchestrator: object, args: argparse.Namespace) -> int:
    from agent.orchestrator import Orchestrator

    assert isinstance(orchestrator, Orchestrator)
    for plan in orchestrator.plan(args.only, args.skip):
        if plan.empty:
            print(f"{plan.phase}: no changes")
            continue
        print(f"{plan.phase}: {len(plan.changes)} change(s)")
        for note in plan.notes:
            print(f"  * {note}")
        for change in plan.changes:
            print(f"  ~ {change.summary}")
            for line in change.diff.splitlines():
                print(f"    {line}")
    return 0


def _reset(host: Host, session: object) -> int:
    from agent.ipam.base import PluginEnv
    from agent.ipam.release import release_all
    from agent.session import Session
    from agent.state import Journal

    assert isinstance(session, Session)
    env = PluginEnv(host, session.machine.facts if session.machine else None, session.client)
    outcomes = release_all(Journal.load(host), session.loaded.config.spec.ipam.plugins, env)
    for outcome in outcomes:
        print(outcome)
    if not outcomes:
        print("no IPAM addresses recorded: nothing to release")
    failed = [o.error for o in outcomes if o.error is not None]
    if not failed:
        return 0
    return 3 if all(e.temporary for e in failed) else 1


def _print_outcomes(result: object) -> None:
    from agent.orchestrator import RunResult

    assert isinstance(result, RunResult)
    for o in result.outcomes:
        detail = {
            "applied": f"applied {o.changes} change(s)",
            "up-to-date": "up to date, nothing to apply",
            "skipped": "skipped",
            "failed": f"FAILED {o.reason}",
            "pending": "not run",
        }[o.outcome]
        tail = f": {o.message}" if o.message and o.outcome != "up-to-date" else ""
        print(f"{o.phase:<8} {detail}{tail}")
    if result.outcomes and all(o.outcome == "up-to-date" for o in result.outcomes):
        print("nothing to do: every phase is up to date")


def _status_document(host: Host) -> dict[str, object]:
    """`status --json`: the conditions as last published, and the journal's phases."""
    from dataclasses import asdict

    from agent.report import from_previous_boot, read_status
    from agent.state import Journal

    journal = Journal.load(host)
    status = read_status(host)
    return {
        "final": status[1] if status else False,
        "previous_boot": from_previous_boot(host),
        "conditions": [asdict(c) for c in status[0]] if status else [],
        "phases": {n: asdict(r) for n, r in journal.phases.items()},
    }


def _status(host: Host, *, as_json: bool) -> int:
    from agent.report import from_previous_boot, read_status

    if as_json:
        print(json.dumps(_status_document(host), indent=2))
        return 0
    status = read_status(host)
    if status is None:
        print("no run recorded yet (nothing under /var/lib/machine-agent)")
        return 0
    conditions, final = status
    for c in conditions:
        print(f"{c.type:<18} {c.status:<8} {c.reason:<20} {c.message}")
    if from_previous_boot(host):
        print("(from a previous boot: this boot's run has not reported yet)")
    elif not final:
        print("(a run is in progress or was interrupted)")
    return 0


WAIT_POLL = 0.5
"""Seconds between reads of the status file while `status --wait` follows a run."""


def _status_wait(host: Host, *, as_json: bool, timeout: float) -> int:
    """Follow this boot's run to its outcome. The status file outlives a reboot, so one
    written in an earlier boot (agent.report.BOOT_ID) counts as no run yet; the daemon
    also marks it not final as it starts."""
    from agent.report import SUMMARY, from_previous_boot, read_status

    deadline = host.clock.monotonic() + timeout
    shown: dict[str, tuple[str, str, str]] = {}
    said_waiting = False
    while True:
        status = None if from_previous_boot(host) else read_status(host)
        if status is not None:
            conditions, final = status
            for c in conditions:
                now = (c.status, c.reason, c.message)
                if not as_json and c.type != SUMMARY and shown.get(c.type) != now:
                    print(f"{c.type:<18} {c.status:<8} {c.reason:<20} {c.message}", flush=True)
                shown[c.type] = now
            if final:
                break
        elif not as_json and not said_waiting:
            print("waiting for the agent to start a run", flush=True)
            said_waiting = True
        if host.clock.monotonic() >= deadline:
            print(f"machine-agent: no outcome within {timeout:g}s; the run goes on "
                  "(`machine-agent status` shows where it is)", file=sys.stderr)
            if as_json:
                print(json.dumps({**_status_document(host), "outcome": "timeout"}, indent=2))
            return 1
        host.clock.sleep(WAIT_POLL)
    summary = next((c for c in conditions if c.type == SUMMARY), None)
    ok = summary is not None and summary.status == "True"
    if as_json:
        print(json.dumps({**_status_document(host),
                          "outcome": "bootstrapped" if ok else "failed"}, indent=2))
    elif summary is not None:
        print(f"{SUMMARY:<18} {summary.status:<8} {summary.reason:<20} {summary.message}")
    return 0 if ok else 1


def _daemon(host: Host, files: list[str], cloud_init_wait: float) -> int:
    from agent.daemon import Daemon
    from agent.systemd import take_manager_env

    notifier, watchdog = take_manager_env(os.environ)
    return Daemon(host, [os.path.abspath(f) for f in files], notifier=notifier,
                  watchdog=watchdog, cloud_init_wait=cloud_init_wait).run()


def _config(host: Host, args: argparse.Namespace) -> int:
    from agent.config.sources import FileSource
    from agent.session import load

    if args.config_command == "validate":
        load(host, [FileSource(os.path.abspath(f), required=True, outside_root=True)
                           for f in args.files])
        print(f"{len(args.files)} file(s) valid")
        return 0
    import yaml

    from agent.config.fields import encode

    loaded = _load(host, args)
    doc = encode(loaded.config)
    if not args.origin:
        print(yaml.safe_dump(doc, sort_keys=False), end="")
        return 0
    from agent.config.fields import join_path

    def walk(value: object, path: str) -> None:
        if isinstance(value, dict) and value:
            for key, sub in value.items():
                walk(sub, join_path(path, key))
            return
        shown = json.dumps(value)
        print(f"{path} = {shown}  # {loaded.origin_of(path)}")

    walk(doc, "")
    return 0


if __name__ == "__main__":
    sys.exit(main())
