"""`spec.network.networkConfigFrom`: the network-config v2 document read from a file or
from cloud-init's instance data into `spec.network.networkConfig`, before the
configuration is decoded (the decoder then translates it like an inline one)."""

from __future__ import annotations

from typing import Any

import yaml

from agent import yamlsafe
from agent.config import checks, yamlkeys
from agent.config.fragment import yaml_structure_problem
from agent.config.loaded import Origins
from agent.config.network import CLOUD_INIT
from agent.config.sources.cloudinit import datasource_network_config
from agent.errors import FieldError, PermanentError
from agent.host import Host

FROM = "spec.network.networkConfigFrom"
TARGET = "spec.network.networkConfig"
MAX_SIZE = 1024 * 1024


def read_network_config(host: Host, document: dict[str, Any], origins: Origins,
                        errors: list[FieldError]) -> None:
    """Put the document `networkConfigFrom` names into `networkConfig` (in place)."""
    spec = document.get("spec")
    network = spec.get("network") if isinstance(spec, dict) else None
    source = network.get("networkConfigFrom") if isinstance(network, dict) else None
    if not isinstance(network, dict) or not isinstance(source, str):
        return
    if network.get("networkConfig") is not None:
        errors.append(FieldError(TARGET, "is given with networkConfigFrom",
                                 "give the document inline or where it is read from"))
        return
    if source == CLOUD_INIT:
        found = datasource_network_config(host, errors)
        if found is None:
            return
        doc, origin = found[0], f"cloud-init ({found[1]})"
    else:
        if checks.absolute_path(source) is not None:
            return  # the decoder reports the path itself
        origin = f"network-config v2 file {source}"
        try:
            raw = host.read_bytes(source, limit=MAX_SIZE)
        except (OSError, PermanentError) as err:
            errors.append(FieldError(FROM, f"cannot read {source}: {err}"))
            return
        try:
            text = raw.decode()
            # aliases and deep nesting refused before anything is built (a bomb, or a
            # RecursionError in the YAML composer)
            refused = yaml_structure_problem(text, yamlsafe.LOADER)
            if refused is not None:
                errors.append(FieldError("(file)", refused[0], refused[1], origin=origin))
                return
            doc = yamlkeys.load(text)
        except yamlkeys.DuplicateKey as err:
            errors.append(FieldError("(file)", str(err.problem), "give each key once: netplan "
                                     "merges an interface written twice, YAML keeps only "
                                     "the last one; write it once", origin=origin))
            return
        except (UnicodeDecodeError, yaml.YAMLError) as err:
            errors.append(FieldError("(file)", f"is not YAML: {err}", origin=origin))
            return
    network["networkConfig"] = doc
    origins.record(doc, TARGET, origin)
