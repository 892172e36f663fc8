"""What each command of the command line does, once agent.cli has parsed it, and the
exit status it ends with (agent.cli's EXIT_CODES). Imported only after parsing: every
import here is deferred to the command that needs it (`--help` is benchmarked)."""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import TYPE_CHECKING

from agent import __version__

if TYPE_CHECKING:
    from agent.config import LoadedConfig
    from agent.host import Host

CRASH_AFTER_ENV = "MACHINE_AGENT_CRASH_AFTER"
"""Test hook: kill the process right after its Nth side effect (the crash harness)."""
COMMANDS_ON_HOST_ENV = "MACHINE_AGENT_COMMANDS_ON_HOST"
"""Test hook: `1` makes a --root tree without --netns a test node whose (stand-in)
commands run on this host, as before issue 26 #11; the suite sets it (tests/conftest.py)
and the tests of the image policy unset it."""



def run(args: argparse.Namespace) -> int:
    """Run the parsed command; an error a user sees is printed, and its exit status
    returned: 2 for the configuration, 3 for a temporary failure, 1 otherwise."""
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
    host = node_host(args.root, args.netns)
    if args.command == "status":
        return _status(host, args)
    if args.command == "analyze":
        return _analyze(host, args.format)
    if args.command == "daemon":
        return _daemon(host, args.config, _duration(args.cloud_init_wait))
    if args.command == "config":
        return _config(host, args)
    from agent.state import node_lock

    def waiting(message: str) -> None:
        print(f"machine-agent: {message}", file=sys.stderr, flush=True)

    if args.command == "clean":  # never while a run or the daemon changes the node
        from agent.console.clean import clean

        with node_lock(host, "clean", wait=not args.no_wait, on_wait=waiting):
            report = clean(host, logs=args.logs, machine_id=args.machine_id,
                           force=args.force)
        print("\n".join(report.lines()))
        return 0
    from agent.session import open_session

    if args.command == "plan":  # read-only: never waits for the node lock
        session = open_session(host, [os.path.abspath(f) for f in args.config],
                               wait_for_bootstrap=False,
                               cloud_init_wait=_duration(args.cloud_init_wait))
        source = session.machine.config if session.machine is not None else None
        if source is not None and source.text is not None:
            # the digest an in-place update waits for on the Machine (AgentConfigApplied)
            print(f"configuration: the node's files and {source.label}")
        return _plan(session.orchestrator(host, reporting=False), args)
    # Opening the session already writes (credentials, the bootstrap data's files).
    with node_lock(host, args.command, wait=not args.no_wait, on_wait=waiting):
        session = open_session(host, [os.path.abspath(f) for f in args.config],
                               wait_for_bootstrap=args.command == "run",
                               cloud_init_wait=_duration(args.cloud_init_wait))
        if args.command in ("release-addresses", "reset"):
            return _reset(host, session)
        result = session.orchestrator(host).run(args.only, args.skip)
    from agent.console.plan import render_outcomes

    if text := render_outcomes(result):
        print(text)
    return result.exit_code


def _doctor(args: argparse.Namespace) -> int:
    from agent.doctor.registry import EXIT_NOT_RUN, diagnose, render_text
    from agent.host import Host

    if not os.path.isdir(args.root):
        print(f"machine-agent doctor: --root {args.root} is not a directory", file=sys.stderr)
        return EXIT_NOT_RUN
    diagnosis = diagnose(Host(args.root, netns=args.netns),
                         [os.path.abspath(f) for f in args.config], args.phase)
    if args.format == "json":
        print(json.dumps(diagnosis.document(), indent=2))
    else:
        print(render_text(diagnosis))
    return diagnosis.exit_code


def node_host(root: str, netns: str | None = None) -> Host:
    from agent.host import EffectLog, Host

    crash = os.environ.get(CRASH_AFTER_ENV)
    # A root other than / without a namespace is an image tree: no command on the host
    # (agent.host.Host.image).
    return Host(root, effects=EffectLog(crash_after=int(crash) if crash else None),
                netns=netns, image=os.path.realpath(root) != "/" and netns is None
                and os.environ.get(COMMANDS_ON_HOST_ENV) != "1")


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
    from agent.console.plan import render_plans
    from agent.orchestrator import Orchestrator

    assert isinstance(orchestrator, Orchestrator)
    plans = orchestrator.plan(args.only, args.skip, show_secrets=args.show_secrets)
    if text := render_plans(plans, orchestrator.host):
        print(text)
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


def _status(host: Host, args: argparse.Namespace) -> int:
    from agent.console.status import condition_phases, read_view, render
    from agent.console.wait import wait_for_outcome

    if args.wait:
        return wait_for_outcome(host, fmt=args.format, timeout=args.timeout)
    view = read_view(host)
    print(render(view, args.format, long=args.long,
                 phase_of=condition_phases() if args.long else None))
    return view.exit_code


def _analyze(host: Host, fmt: str) -> int:
    from agent.console.status import condition_phases
    from agent.console.timeline import analyze, render
    from agent.report import read_status_document

    print(render(analyze(read_status_document(host), condition_phases()), fmt))
    return 0


def _daemon(host: Host, files: list[str], cloud_init_wait: float) -> int:
    from agent.daemon import Daemon
    from agent.systemd import take_manager_env

    notifier, watchdog = take_manager_env(os.environ)
    return Daemon(host, [os.path.abspath(f) for f in files], notifier=notifier,
                  watchdog=watchdog, cloud_init_wait=cloud_init_wait).run()


def _config(host: Host, args: argparse.Namespace) -> int:
    from agent.session import load

    if args.config_command == "validate":
        from agent.config.validate import validate_files
        from agent.session import load

        valid, error = validate_files(host, args.files, merged=args.merged, load=load)
        for line in valid:
            print(line)
        if error is not None:
            raise error
        return 0
    if args.config_command == "schema":
        from agent.config.schema import agent_config_schema
        from agent.phases import registry

        print(json.dumps(agent_config_schema([p.name for p in registry.load()]), indent=2))
        return 0
    from agent.config import default_sources
    from agent.config.show import render_show
    from agent.session import load

    if args.from_machine:
        loaded = _load(host, args)
    else:
        loaded = load(host, default_sources(
            [os.path.abspath(f) for f in args.config],
            cloud_init_wait=_duration(args.cloud_init_wait)))
    print(render_show(loaded, origin=args.origin))
    return 0
