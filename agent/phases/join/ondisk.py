"""What the node holds where the bootstrap data writes or reads a file, read through the
Host's bound: a FIFO or a device there is refused by name (a read would hang or never
end, and a write would replace the device node), never waited on."""

from __future__ import annotations

import errno

from agent.host import Host
from agent.phases.join.cloudconfig import MAX_FILE_BYTES, BootstrapDataError


def current_content(host: Host, path: str) -> bytes | None:
    """The file at `path` as it is before the bootstrap data's copy replaces it; None
    when there is none, or when it is larger than any file the data carries (so it
    differs)."""
    try:
        return host.read_bytes(path, limit=MAX_FILE_BYTES) if host.exists(path) else None
    except OSError as err:
        if err.errno == errno.EFBIG:
            return None
        raise BootstrapDataError(f"write_files {path}: the node's file cannot be read: "
                                 f"{err.strerror}",
                                 hint=f"remove {path} from the node, or write another path"
                                 ) from err


def read_node_file(host: Host, path: str, what: str) -> str | None:
    """A file the bootstrap data names for kubeadm to read (the kubeadm config, the
    discovery kubeconfig); None when it does not exist."""
    try:
        return host.read_text(path, limit=MAX_FILE_BYTES)
    except (OSError, UnicodeDecodeError) as err:
        why = err.strerror if isinstance(err, OSError) else "not UTF-8 text"
        raise BootstrapDataError(f"{what} {path} cannot be read: {why}",
                                 hint=f"give {what} as a regular text file") from err
