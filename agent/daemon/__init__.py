"""The long-running service (`machine-agent daemon`): the bootstrap, then the Machine's
lifecycle (deletion, configuration changes) until stopped."""

from agent.daemon.service import Daemon

__all__ = ["Daemon"]
