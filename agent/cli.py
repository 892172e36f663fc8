"""Command-line parsing only; every command calls into the rest of the agent.

Imports are deferred to the command that needs them, so `machine-agent --version` and
`--help` start fast on a node that is still booting.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, NoReturn

from agent import __version__

if TYPE_CHECKING:
    pass

EXIT_CODES = """\
exit status:
  0  done: every selected phase completed (or was already up to date)
  1  a phase failed permanently; the reason is on its condition (`machine-agent status`)
  2  the command line or the configuration is invalid; every problem is listed
  3  a phase failed temporarily and retries ran out; running again may succeed
"""

STATUS_EXIT_CODES = """\
exit status (as cloud-init status):
  0    bootstrapped, or no outcome yet (running, or not started on this boot)
  1    failed: a phase failed, or the run ended with phases not done
  2    bootstrapped with recoverable problems (a phase completed with a warning)
  4    disabled by the kill switch (/etc/machine-agent/disabled, or machine-agent.disabled
       on the kernel command line) and no outcome on this boot: no run will come
  124  --wait: no outcome within --timeout; the run goes on
"""

BUILTIN_COMMANDS = frozenset(("run", "plan", "status", "analyze", "daemon", "config", "doctor",
                              "release-addresses", "reset", "clean", "version"))
"""Commands of the agent itself: parsing one of them needs no scan of plugin commands."""


def _parser(plugins: bool = True) -> argparse.ArgumentParser:
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
    parser.add_argument("--log-format", choices=("auto", "text", "json", "journal"),
                        default="auto",
                        help="auto (default): the journal's native protocol, with "
                             "priority and the fields PHASE, REASON, MACHINE, ATTEMPT, when "
                             "standard error is the journal (a systemd service), else text; "
                             "json: JSON lines for log shippers")
    parser.add_argument("--log-level", choices=("debug", "info", "warning", "error"),
                        default="info",
                        help="the least severe messages logged (default: info; debug adds "
                             "each request and command, never a secret)")
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

    def with_lock(p: argparse.ArgumentParser) -> None:
        p.add_argument("--no-wait", action="store_true",
                       help="when another command is changing this node (the daemon, "
                            "another run), fail at once naming it (exit 3) instead of "
                            "waiting for it to finish")

    run = sub.add_parser("run", help="bootstrap the node: run the phases in order",
                         description="Plan, apply and verify each phase in order, "
                                     "journaling every step. Safe to run again: completed "
                                     "phases with unchanged inputs are skipped.",
                         epilog=EXIT_CODES, formatter_class=argparse.RawDescriptionHelpFormatter)
    with_config(run)
    with_selection(run)
    with_lock(run)

    plan = sub.add_parser("plan", help="show what each phase would change, without changing it",
                          description="Print every change the phases would make, with "
                                      "diffs for files. Nothing is written or run.",
                          epilog="exit status:\n  0  the plan was printed (with or without "
                                 "changes)\n  1  a phase could not plan; the message says "
                                 "why\n  2  the command line or the configuration is "
                                 "invalid; every problem is listed\n  3  something the plan "
                                 "reads could not be reached (the management cluster); "
                                 "running again may succeed\n",
                          formatter_class=argparse.RawDescriptionHelpFormatter)
    with_config(plan)
    with_selection(plan)
    plan.add_argument("--show-secrets", action="store_true",
                      help="show the bootstrap data's file contents and command lines "
                           "(secret by default: paths, sizes and digests only)")

    status = sub.add_parser(
        "status", help="show this boot's outcome and each phase's condition",
        description="Show this boot's outcome and each phase's condition from the last "
                    "run. With --wait, follow the run in progress until its outcome is "
                    "known (a finished run is reported at once).",
        epilog=STATUS_EXIT_CODES, formatter_class=argparse.RawDescriptionHelpFormatter)
    status.add_argument("--format", choices=("text", "json", "yaml"), default="text",
                        help="text for people; json or yaml (the Machine's camelCase) "
                             "for scripts")
    status.add_argument("--json", action="store_const", const="json", dest="format",
                        help="same as --format json")
    status.add_argument("--long", action="store_true",
                        help="each phase with its timing, attempts, reason, whole message "
                             "and fix")
    status.add_argument("--wait", action="store_true",
                        help="block until the run's outcome is known, showing progress")
    status.add_argument("--timeout", type=float, default=1800.0, metavar="SECONDS",
                        help="with --wait: give up after this long (default: 1800; exit "
                             "124)")

    analyze = sub.add_parser(
        "analyze", help="where this boot's run spent its time, per phase and per wait",
        description="Like `cloud-init analyze blame`: the run's set-up, each phase and "
                    "each external wait inside it (a gateway, the clock, kubeadm join, "
                    "the Node's registration) with its duration, then the slowest waits.",
        epilog="exit status:\n  0  the analysis was printed (without a recorded run, it "
               "says so)\n  1  the status file could not be read (the message names it)\n",
        formatter_class=argparse.RawDescriptionHelpFormatter)
    analyze.add_argument("--format", choices=("text", "json"), default="text",
                         help="text for people, json for scripts")
    analyze.add_argument("--json", action="store_const", const="json", dest="format",
                         help="same as --format json")

    daemon = sub.add_parser(
        "daemon", help="the systemd service: bootstrap, then stay until stopped",
        description="Run the phases like `run`, tell systemd (Type=notify: STATUS= per "
                    "phase, READY=1 once the outcome is known, WATCHDOG=1 when the unit "
                    "sets WatchdogSec=), then stay until SIGTERM. Exits 0 on SIGTERM, 2 "
                    "when the node's own configuration is invalid (a mistake in the "
                    "Machine's ConfigMap or Secret is reported on the Machine, and the "
                    "daemon waits for it to be fixed).")
    with_config(daemon)

    config = sub.add_parser("config", help="show, validate or describe the configuration")
    config_sub = config.add_subparsers(dest="config_command", metavar="ACTION", required=True)
    show = config_sub.add_parser(
        "show", help="the merged configuration, defaults included (offline)",
        description="The configuration from this node's own sources (defaults, the baked "
                    "file, drop-ins, cloud-init, the kernel command line, --config), "
                    "secrets masked. Offline: the management cluster is not asked unless "
                    "--from-machine is given.")
    show.add_argument("--origin", action="store_true",
                      help="say where each value came from (file, drop-in, default)")
    show.add_argument("--from-machine", action="store_true",
                      help="with spec.management: also read the Machine's ConfigMap or "
                           "Secret (machine-agent.io/config) from the management cluster, "
                           "as the agent does")
    with_config(show)
    validate = config_sub.add_parser(
        "validate", help="check AgentConfig files offline; lists every error with its path",
        description="Check each file on its own (every error with its file and path), or "
                    "with --merged the files as one stack in the order given, later "
                    "winning, as the agent merges its sources. Exit 0 valid, 2 not.")
    validate.add_argument("files", nargs="+", metavar="FILE")
    validate.add_argument("--merged", action="store_true",
                          help="validate the files merged into one configuration instead")
    config_sub.add_parser(
        "schema", help="print the JSON Schema of AgentConfig",
        description="The JSON Schema (draft 2020-12) of an AgentConfig document, generated "
                    "from the same model as docs/configuration.md: for editors (yaml-"
                    "language-server), CI linting and kubeconform.")

    doctor = sub.add_parser(
        "doctor", help="diagnose the node read-only: every check with what was seen and the fix",
        description="Run the phases' own checks without changing anything and print one "
                    "line per check: PASS, WARN or FAIL, what was seen, and the fix "
                    "(docs/doctor.md lists every check and the --json format).",
        epilog="exit status:\n  0  every check passed (warnings allowed)\n  1  a check "
               "failed\n  2  doctor could not run (the root is missing, or a check broke)\n",
        formatter_class=argparse.RawDescriptionHelpFormatter)
    with_config(doctor)
    doctor.add_argument("--format", choices=("text", "json"), default="text",
                        help="text for people, json (the stable document) for scripts")
    doctor.add_argument("--json", action="store_const", const="json", dest="format",
                        help="same as --format json")
    doctor.add_argument("--phase", action="append", default=[], metavar="NAME",
                        choices=doctor_areas,
                        help="show only this area (repeatable): " + ", ".join(doctor_areas))

    release = sub.add_parser(
        "release-addresses", aliases=["reset"],
        help="give back the IPAM addresses this node claimed (also: reset)",
        description="Release every address the network phase claimed from an IPAM backend "
                    "(as recorded in the journal), so NetBox and other backends can hand "
                    "them out again; nothing else on the node changes (no kubeadm reset: "
                    "the daemon's spec.lifecycle.onDelete does that when the Machine is "
                    "deleted). capi claims also go with the Machine when it is deleted. "
                    "`reset` is the old name.",
        epilog="exit status:\n  0  every recorded address was released (or none was "
               "recorded)\n  1  a backend refused a release; the line names it and why\n"
               "  2  the configuration is invalid; every problem is listed\n"
               "  3  a backend could not be reached; running again may succeed\n",
        formatter_class=argparse.RawDescriptionHelpFormatter)
    with_config(release)
    with_lock(release)

    clean = sub.add_parser(
        "clean", help="seal an image: remove this node's agent state (like cloud-init clean)",
        description="Remove what makes this machine a particular node, so an image made "
                    "from it bootstraps as a new one: the agent's state under "
                    "/var/lib/machine-agent (journal of runs, status, stored credentials) "
                    "and the bootstrap success sentinel. The configuration in "
                    "/etc/machine-agent and what the phases wrote stay. Refused while the "
                    "journal records IPAM addresses the node holds (run release-addresses "
                    "first) unless --force.",
        epilog="exit status:\n  0  cleaned; each line says what was removed\n"
               "  1  refused, nothing removed: the message says why (IPAM addresses still "
               "recorded, a path\n     outside the image tree, ...)\n",
        formatter_class=argparse.RawDescriptionHelpFormatter)
    clean.add_argument("--logs", action="store_true",
                       help="also remove the agent's own logs, as cloud-init clean "
                            "--logs does; the system journal, which holds them beside "
                            "every other service's, stays")
    clean.add_argument("--machine-id", action="store_true",
                       help="also empty /etc/machine-id, so each machine made from the "
                            "image gets its own at first boot")
    clean.add_argument("--force", action="store_true",
                       help="clean even though IPAM addresses are still recorded (they "
                            "stay claimed in the backend)")
    with_lock(clean)

    sub.add_parser("version", help="print the version",
                   description="Print the agent's version (as --version does).")

    for command in _plugin_commands() if plugins else []:
        command.add_parser(sub)
    return parser


COMMANDS_GROUP = "machine_agent.commands"
"""Entry points that add a command: the sandbox distribution adds `demo`. Each names an
object with `add_parser(subparsers)`, which sets `plugin_run` as the parser's default."""


def _plugin_commands() -> list[Any]:
    from agent.entrypoints import entry_points

    return [ep.load() for ep in sorted(entry_points(COMMANDS_GROUP),
                                       key=lambda ep: ep.name)]


class _Quiet(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        raise ValueError(message)


def _needs_plugins(argv: Sequence[str]) -> bool:
    """Whether parsing `argv` may need a plugin's command: not when it names a built-in
    one (or asks for --version). Scanning the entry points reads every installed
    distribution's metadata: ~20 ms of CPU and 3.5 MiB of a bootstrap's peak."""
    pre = _Quiet(add_help=False, allow_abbrev=False)
    for option in ("--root", "--netns", "--log-format", "--log-level"):
        pre.add_argument(option)
    try:
        _, rest = pre.parse_known_args(argv)
    except ValueError:  # e.g. --root without a value: the full parser says so
        return True
    return not rest or (rest[0] not in BUILTIN_COMMANDS and rest[0] != "--version")


EXIT_BROKEN_PIPE = 141
"""The reader of our output went away (`machine-agent status | head`): the status a
program killed by SIGPIPE has in the shell, without Python's traceback."""


def main(argv: Sequence[str] | None = None) -> int:
    from agent.printable import PrintableStream

    # Every line a command prints goes through printable(): no raw control character
    # from a value (a command's output, bootstrap data) reaches the terminal.
    stdout, stderr = sys.stdout, sys.stderr
    sys.stdout, sys.stderr = PrintableStream(stdout), PrintableStream(stderr)
    try:
        code = _main(argv)
        sys.stdout.flush()  # here, not at exit, so a closed pipe is caught below
        return code
    except BrokenPipeError:
        # Later writes (the interpreter's own flush at exit) go nowhere instead of
        # raising again.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
        return EXIT_BROKEN_PIPE
    finally:
        sys.stdout, sys.stderr = stdout, stderr


def _main(argv: Sequence[str] | None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        parser = _parser(plugins=_needs_plugins(argv))
    except Exception as err:  # a phase plugin that cannot be loaded (agent.errors is
        from agent.errors import AgentError  # imported only now: it is slow for --help)

        if not isinstance(err, AgentError):
            raise
        print(f"machine-agent: {err}", file=sys.stderr)
        return 1
    args = parser.parse_args(argv)
    from agent.logs import setup_logging

    setup_logging(args.log_format, args.log_level)
    from agent.commands import run

    return run(args)


if __name__ == "__main__":
    sys.exit(main())
