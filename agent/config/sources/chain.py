"""The chain of configuration sources (one module each beside this one), their
precedence, and the configuration loaded from them.

Each source yields fragments: partial AgentConfig documents with an origin. The chain
merges them in order (a later fragment wins; mappings merge key by key, lists and scalars
are replaced whole) and remembers the origin of every value, so `config show --origin`
can say which file, instance-data key or ConfigMap set it.

Precedence, lowest first:
  1. built-in defaults
  2. the baked file              /etc/machine-agent/config.yaml
  3. drop-ins, lexical order     /etc/machine-agent/config.d/*.yaml
  4. cloud-init instance data    (agent.config.sources.cloudinit): the metadata key
     `machine-agent`, then each user-data MIME part `application/x-machine-agent+yaml`,
     origin e.g. `cloud-init user-data (part machine-agent.yaml)`
  5. the kernel command line     (agent.config.sources.cmdline): the file named by
     `machine-agent.config=PATH`, then `machine-agent.machine=NAMESPACE/NAME`
  6. files given with --config, in the order given
  7. the management cluster: the ConfigMap or Secret named by the Machine's annotation
     `machine-agent.io/config` (`configmap/NAME` or `secret/NAME`, key `config.yaml`),
     origin e.g. `configmap default/worker-0-agent` (agent.kube.machine_config).
     It is above the local files: the cluster operator's per-Machine settings win over
     what the image bakes in. `spec.identity` and `spec.management` say how to reach the
     cluster, so they come from local sources only; the fragment may not set them.

Why this order: the image is generic (2, 3); the platform says what this instance is
(4); a boot entry is chosen per machine by whoever boots it, on bare metal where there is
no cloud-init datasource, and is the more deliberate choice when both exist (5); a person
at the console passes --config on purpose (6); the cluster has the last word on what it
owns (7).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from typing import Any, Protocol

from agent import __version__
from agent.config.fields import Decoder, Problem
from agent.config.fragment import Fragment
from agent.config.loaded import LoadedConfig, merge
from agent.config.model import AgentConfig
from agent.config.sources.cloudinit import DEFAULT_WAIT, CloudInitSource
from agent.config.sources.cmdline import KernelCmdlineSource
from agent.config.sources.files import BAKED_FILE, DROP_IN_DIR, DropInSource, FileSource
from agent.config.sources.netconfig import read_network_config
from agent.errors import ConfigError, FieldError
from agent.host import Host

log = logging.getLogger(__name__)


class Source(Protocol):
    def fragments(self, host: Host, errors: list[FieldError]) -> Iterable[Fragment]:
        """The source's fragments; problems reading them go to `errors`."""


def default_sources(extra_files: Iterable[str] = (), *,
                    cloud_init_wait: float | None = None) -> list[Source]:
    """The local sources in precedence order (module docstring); `cloud_init_wait`
    bounds the wait for cloud-init (default agent.config.sources.cloudinit.DEFAULT_WAIT)."""
    wait = DEFAULT_WAIT if cloud_init_wait is None else cloud_init_wait
    return [FileSource(BAKED_FILE), DropInSource(DROP_IN_DIR), CloudInitSource(wait),
            KernelCmdlineSource(),
            *(FileSource(f, required=True, outside_root=True) for f in extra_files)]


ConfigCheck = Callable[[dict[str, Any]], Iterable[Problem]]
"""A check of the merged document by what knows more than the model (the phase
registry, the installed IPAM plugins); it runs also when the document has other mistakes,
so every error is listed at once. Its paths start at the document's root."""


def load_config(host: Host, sources: Iterable[Source],
                checks: Iterable[ConfigCheck] = ()) -> LoadedConfig:
    """Read, merge and validate (the model's own checks, then `checks`); raises
    ConfigError listing every problem with its origin."""
    errors: list[FieldError] = []
    fragments = [frag for source in sources for frag in source.fragments(host, errors)]
    document, origins = merge(fragments)
    read_network_config(host, document, origins, errors)
    decoder = Decoder()
    config = decoder.decode_object(AgentConfig, document, "")
    for check in checks:
        for path, message, hint in check(document):
            decoder.fail(path, message, hint)
    shared = {f.origin for f in fragments if f.shared}
    warnings: list[FieldError] = []
    for e in decoder.errors:
        found = FieldError(e.path, e.message, e.hint, origin=origins.of_problem(e.path))
        (warnings if _newer_agents_key(found, shared) else errors).append(found)
    if errors or not isinstance(config, AgentConfig):
        raise ConfigError(errors)
    for w in warnings:
        log.warning("%s: %s: unknown to this agent (%s), ignored: a setting of a newer "
                    "agent? (docs/version-skew.md)", w.origin, w.path, __version__)
    return LoadedConfig(config, document, origins, warnings)


def _newer_agents_key(error: FieldError, shared: set[str]) -> bool:
    """An unknown key in a shared source that resembles no known one: taken for a setting
    a newer agent knows. A near miss ("did you mean ...") stays an error: a typo must
    not be ignored silently."""
    return (error.message == "unknown field" and error.origin in shared
            and not (error.hint or "").startswith("did you mean"))
