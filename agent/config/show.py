"""`machine-agent config show`: the merged configuration as YAML, or every value with
the source it came from."""

from __future__ import annotations

import json

from agent.config.fields import join_path
from agent.config.loaded import LoadedConfig
from agent.records import to_json


def render_show(loaded: LoadedConfig, *, origin: bool = False) -> str:
    import yaml

    doc = to_json(loaded.config, redact_secrets=True)
    if not origin:
        return str(yaml.safe_dump(doc, sort_keys=False)).rstrip("\n")
    lines: list[str] = []

    def walk(value: object, path: str) -> None:
        if isinstance(value, dict) and value:
            for key, sub in value.items():
                walk(sub, join_path(path, key))
            return
        lines.append(f"{path} = {json.dumps(value)}  # {loaded.origin_of(path)}")

    walk(doc, "")
    return "\n".join(lines)
