"""The jinja2 templates the agent renders (networkd, netplan, chrony, kubeadm, RBAC, CNI),
and the one way to render them.

Values reaching a template are validated before (agent/config/checks.py); the filter `q`
quotes a string as JSON, which is also a YAML double-quoted scalar.
"""

from __future__ import annotations

import functools
import json
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import jinja2


@functools.cache
def _environment() -> jinja2.Environment:
    import jinja2  # lazily: start-up time and memory are measured

    env = jinja2.Environment(
        loader=jinja2.PackageLoader("agent", "templates"),
        undefined=jinja2.StrictUndefined, autoescape=False, keep_trailing_newline=True,
        trim_blocks=True, lstrip_blocks=True)
    env.filters["q"] = json.dumps
    return env


def render(name: str, **values: Any) -> str:
    """Render the template at `name` (relative to agent/templates, e.g. `time/chrony.conf.j2`).

    The environment, and with it every compiled template, is made once per process."""
    return _environment().get_template(name).render(**values)
