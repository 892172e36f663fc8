"""The YAML loader of configuration and network-config v2 documents: the safe loader
(libyaml's when PyYAML has it), refusing a key given twice in one mapping. YAML's loaders
keep the last one silently, so an interface written twice in a v2 file lost its first
addresses (netplan merges the two); saying so, naming the key, is the only safe answer."""

from __future__ import annotations

from typing import Any

import yaml

from agent.yamlsafe import LOADER


class DuplicateKey(yaml.constructor.ConstructorError):
    """A key given twice in one mapping; `problem` names it and both lines."""


class StrictLoader(LOADER):  # type: ignore[misc]
    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: dict[Any, int] = {}
        for key_node, _ in node.value:
            if not isinstance(key_node, yaml.ScalarNode) or key_node.value == "<<":
                continue
            key = self.construct_object(key_node)
            line = key_node.start_mark.line + 1
            if key in seen:
                raise DuplicateKey(
                    None, None, f"the key {key_node.value!r} is given twice in one mapping "
                    f"(lines {seen[key]} and {line})", key_node.start_mark)
            seen[key] = line
        mapping: dict[Any, Any] = super().construct_mapping(node, deep=deep)
        return mapping


def load(text: str) -> Any:
    """The document in `text` (yaml.YAMLError, or DuplicateKey, if it is not one)."""
    return yaml.load(text, Loader=StrictLoader)  # a safe loader: SafeLoader beneath
