"""PyYAML's safe loader, libyaml's when PyYAML was built with it: the same documents and
types as `yaml.safe_load`, parsed and composed in C where the pure-Python loader reads
a document a character at a time. The one loader every reader of YAML uses."""

from __future__ import annotations

from typing import Any

import yaml

LOADER: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def load(text: str) -> Any:
    """The one document in `text` (yaml.YAMLError if it is not one)."""
    return yaml.load(text, Loader=LOADER)  # a safe loader: SafeLoader's constructor


def load_all(text: str) -> list[Any]:
    """Every document in `text`, in order (yaml.YAMLError if one is not a document)."""
    return list(yaml.load_all(text, Loader=LOADER))
