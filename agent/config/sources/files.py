"""Configuration files as sources: the baked file, the drop-in directory, and files
given with --config."""

from __future__ import annotations

from collections.abc import Iterable

from agent.config.fragment import MAX_BYTES, Fragment, parse_fragment
from agent.errors import FieldError
from agent.host import Host
from agent.hostpath import UnreadableFileError
from agent.recordtype import record

BAKED_FILE = "/etc/machine-agent/config.yaml"
DROP_IN_DIR = "/etc/machine-agent/config.d"


@record(frozen=True)
class FileSource:
    """One YAML file; a missing file is an error only when `required`.

    `outside_root` files (given on the command line) are read from the real file system,
    not from under the Host's root.
    """

    path: str
    required: bool = False
    outside_root: bool = False

    def fragments(self, host: Host, errors: list[FieldError]) -> Iterable[Fragment]:
        if self.outside_root:
            host = Host("/", read_only=True)
        try:
            text = host.read_text(self.path, limit=MAX_BYTES)
        except UnreadableFileError as err:
            errors.append(FieldError("(file)", f"cannot read: {err}", "give a configuration "
                                     "under 1 MiB, as a regular file", origin=self.path))
            return []
        except (OSError, UnicodeDecodeError) as err:
            errors.append(FieldError("(file)", f"cannot read: {err}", origin=self.path))
            return []
        if text is None:
            if self.required:
                errors.append(FieldError("(file)", "does not exist", origin=self.path))
            return []
        fragment = parse_fragment(text, self.path, errors)
        return [fragment] if fragment else []


@record(frozen=True)
class DropInSource:
    """Every `*.yaml` in a directory, in lexical order."""

    directory: str

    def fragments(self, host: Host, errors: list[FieldError]) -> Iterable[Fragment]:
        out: list[Fragment] = []
        for name in host.list_dir(self.directory):
            if name.endswith((".yaml", ".yml")):
                out.extend(FileSource(f"{self.directory}/{name}").fragments(host, errors))
        return out
