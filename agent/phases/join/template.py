"""CABPK's cloud-config is a cloud-init jinja template (its first line `## template: jinja`):
cloud-init renders the whole user-data with the node's instance data before it reads the
YAML (cloudinit/handlers/jinja_template.py, cloudinit/templater.py). The agent renders it
the same way, with the same variables, so that what real providers' templates ask for is
answered: CABPK's `{{ ds.meta_data.local_hostname }}`, CAPO's `{{ instance_id }}` in the
provider-id, `{{ v1.local_hostname }}`, `{% if %}` and `{% set %}` statements.

The variables are cloud-init's (`convert_jinja_instance_data`): the instance data of
/run/cloud-init/instance-data-sensitive.json (what cloud-init renders with as root), else
instance-data.json; the keys of `v1` also at the top level (`instance_id`,
`local_hostname`, ...); each key with `-` or `.` also under an alias with `_`; the keys
`base64_encoded_keys` names decoded. Where cloud-init leaves a missing variable in the
text as `CI_MISSING_JINJA_VAR/name` and goes on, the agent refuses the data naming the
variable: a node named `CI_MISSING_JINJA_VAR/...` is worse than none. A node without
cloud-init has no instance data; there the agent answers only the node name
(`local_hostname`, `v1.local_hostname`, `ds.meta_data.local_hostname`) with the Machine's.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import copy
import json
import re
from typing import Any

from agent.config.sources.cloudinit import REDACTED, SENSITIVE
from agent.errors import ConfigError, PermanentError, Reason
from agent.host import Host
from agent.recordtype import record
from agent.templating import TemplateProblem, UndefinedVariable, render_data_template

HEADER = re.compile(r"^##\s*template:\s*(.*?)\s*$", re.IGNORECASE)
"""cloud-init's TYPE_MATCHER (cloudinit/templater.py), on the first line."""
_ALIAS = re.compile(r"[-.]")  # jinja2.lexer.operator_re's part cloud-init relies on


class TemplateError(PermanentError):
    """The bootstrap data's template cannot be rendered as cloud-init would."""

    reason = Reason.ConfigInvalid


@record(frozen=True)
class InstanceData:
    variables: dict[str, Any]
    """cloud-init's jinja variables."""
    origin: str
    """The file they came from."""


def read_instance_data(host: Host) -> InstanceData | None:
    """The node's cloud-init instance data as jinja variables; None when cloud-init
    wrote none (it does not run on this node)."""
    path = SENSITIVE if host.exists(SENSITIVE) else REDACTED
    text = host.read_text(path)
    if text is None:
        return None
    try:
        data = json.loads(text)
    except ValueError as err:
        raise TemplateError(f"{path} is not JSON ({err}), and the bootstrap data is a "
                                 "jinja template rendered with it",
                                 hint="check `cloud-init status --long`") from None
    if not isinstance(data, dict):
        raise TemplateError(f"{path} is not a JSON object")
    decode = [p.replace("-", "_") for p in data.get("base64_encoded_keys") or []
              if isinstance(p, str)]
    return InstanceData(_convert(data, "", decode), path)


def _convert(data: dict[str, Any], prefix: str, decode: list[str]) -> dict[str, Any]:
    """cloud-init's convert_jinja_instance_data(include_key_aliases=True)."""
    out: dict[str, Any] = {}
    for key, value in sorted(data.items()):
        path = f"{prefix}/{key}" if prefix else key
        if path in decode and isinstance(value, str):
            # cloud-init's b64d keeps what it cannot decode as text
            with contextlib.suppress(binascii.Error, UnicodeDecodeError):
                value = base64.b64decode(value).decode()
        if isinstance(value, dict):
            out[key] = _convert(value, path, decode)
            if re.match(r"v\d+$", key):
                for sub, sub_value in out[key].items():
                    out[sub] = copy.deepcopy(sub_value)
        else:
            out[key] = value
        alias = _ALIAS.sub("_", key)
        if alias != key:
            out[alias] = copy.deepcopy(out[key])
    return out


def _node_name_only(node_name: str) -> dict[str, Any]:
    return {"local_hostname": node_name, "v1": {"local_hostname": node_name},
            "ds": {"meta_data": {"local_hostname": node_name}}}


def render_cloud_config(text: str, instance: InstanceData | None,
                        node_name: str | None) -> str:
    """The data with its template header rendered away (unchanged without a header)."""
    first, newline, rest = text.partition("\n")
    header = HEADER.match(first)
    if header is None:
        return text
    kind = header.group(1).lower()
    if kind != "jinja":
        raise TemplateError(f"the bootstrap data is a {kind!r} template; the agent "
                                 "renders jinja templates only",
                                 hint="use `## template: jinja`, as CABPK does")
    variables = (instance.variables if instance is not None
                 else _node_name_only(node_name) if node_name is not None else {})
    try:
        rendered = render_data_template(rest, variables)
    except UndefinedVariable as err:
        raise _unanswered(err.name, instance) from None
    except TemplateProblem as err:
        raise TemplateError(f"the bootstrap data's jinja template does not render: "
                                 f"{err} (line numbers count from after the header)",
                                 hint="fix the template; `{% raw %}` keeps `{{` literal"
                                 ) from None
    except ConfigError as err:
        raise TemplateError(f"the bootstrap data's jinja template puts a value with a "
                                 f"line separator in the data: {err.errors[0].message}",
                                 hint="check the instance data the template reads") from None
    return rendered if rendered.endswith("\n") or not newline else rendered + "\n"


def _unanswered(name: str, instance: InstanceData | None) -> TemplateError:
    if instance is not None:
        return TemplateError(
            f"the bootstrap data's jinja template uses {name!r}, which this node's "
            f"cloud-init instance data ({instance.origin}) does not hold",
            hint="use a variable `cloud-init query --all` shows on the node (instance_id, "
                 "v1.local_hostname, ds.meta_data.*), or write the value in the "
                 "KubeadmConfig")
    return TemplateError(
        f"the bootstrap data's jinja template uses {name!r}, and this node has no "
        f"cloud-init instance data ({REDACTED}) to answer it",
        hint="run cloud-init on the node, or write the value in the KubeadmConfig; without "
             "cloud-init the agent answers only the node name (local_hostname, "
             "v1.local_hostname, ds.meta_data.local_hostname) from the Machine, or from "
             "spec.join.nodeRegistration.name")
