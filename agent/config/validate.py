"""`machine-agent config validate`: each file checked on its own (a file is what a
person edits, and its errors are its own), or, with `--merged`, the files as one stack
in the order given (later wins), as the agent would read them together."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Sequence

from agent.config.loaded import LoadedConfig
from agent.config.sources.chain import Source, load_config
from agent.config.sources.files import FileSource
from agent.errors import ConfigError, FieldError
from agent.host import Host

Load = Callable[[Host, Iterable[Source]], LoadedConfig]


def validate_files(host: Host, files: Sequence[str], *, merged: bool = False,
                   load: Load = load_config) -> tuple[list[str], ConfigError | None]:
    """What was found valid, one line each, and a ConfigError listing every problem of
    every invalid file (each with its file), or None. `load` reads sources into a
    configuration with every check there is (agent.session.load: the phases' and the
    IPAM plugins' too)."""
    sources = [FileSource(os.path.abspath(f), required=True, outside_root=True)
               for f in files]
    if merged:
        try:
            load(host, sources)
        except ConfigError as err:
            return [], err
        return [f"{len(files)} file(s) valid as one configuration, in this order: "
                + ", ".join(files)], None
    valid: list[str] = []
    errors: list[FieldError] = []
    for name, source in zip(files, sources, strict=True):
        try:
            load(host, [source])
        except ConfigError as err:
            # A file's own problems are pinned on it, never on a neighbour.
            errors.extend(e if e.origin else FieldError(e.path, e.message, e.hint, source.path)
                          for e in err.errors)
            continue
        valid.append(f"{name}: valid")
    return valid, ConfigError(errors) if errors else None
