"""`machine-agent config validate`: each file checked on its own (a file is what a
person edits, and its errors are its own), or, with `--merged`, the files as one stack
in the order given (later wins), as the agent would read them together."""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence

from agent.config.sources import FileSource, Source
from agent.errors import ConfigError, FieldError
from agent.host import Host


def validate_files(host: Host, files: Sequence[str],
                   load_config: Callable[[Host, list[Source]], object], *,
                   merged: bool = False) -> tuple[list[str], ConfigError | None]:
    """What was found valid, one line each, and a ConfigError listing every problem of
    every invalid file (each with its file), or None. `load_config` loads and checks a
    stack of sources, with the checks of what sits above the model (agent.session.load:
    phase names, IPAM plugin settings)."""
    sources = [FileSource(os.path.abspath(f), required=True, outside_root=True)
               for f in files]
    if merged:
        try:
            load_config(host, list(sources))
        except ConfigError as err:
            return [], err
        return [f"{len(files)} file(s) valid as one configuration, in this order: "
                + ", ".join(files)], None
    valid: list[str] = []
    errors: list[FieldError] = []
    for name, source in zip(files, sources, strict=True):
        try:
            load_config(host, [source])
        except ConfigError as err:
            # A file's own problems are pinned on it, never on a neighbour.
            errors.extend(e if e.origin else FieldError(e.path, e.message, e.hint, source.path)
                          for e in err.errors)
            continue
        valid.append(f"{name}: valid")
    return valid, ConfigError(errors) if errors else None
