"""Test helpers: `spec.network` documents decoded as the agent decodes them."""

from __future__ import annotations

from typing import Any

from agent.config.fields import Decoder
from agent.config.network import NetworkSpec
from agent.errors import ConfigError


def network_spec(doc: dict[str, Any]) -> NetworkSpec:
    decoder = Decoder()
    spec = decoder.decode_object(NetworkSpec, doc, "spec.network")
    if decoder.errors:
        raise ConfigError(decoder.errors)
    assert isinstance(spec, NetworkSpec)
    return spec


def network_errors(doc: dict[str, Any]) -> list[str]:
    decoder = Decoder()
    decoder.decode_object(NetworkSpec, doc, "spec.network")
    return [str(e) for e in decoder.errors]
