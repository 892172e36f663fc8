"""Management credentials delivered as data (`spec.management.kubeconfigData`, `tokenData`,
`caData` — from cloud-init, a kernel command line config file, or any other source) are
kept on the node in /var/lib/machine-agent/credentials/ (directory 0700, files 0600),
written through the Host, and then used like files the image provides.

They are persistent, not in /run: a node that reboots before it has joined must reach the
management cluster again, and cloud-init's user-data may be gone by then (or, on a PXE
boot, the config drive). Contents are never logged: the values are `secret` settings,
registered with the redactor as they are decoded.
"""

from __future__ import annotations

import dataclasses
import logging

from agent.config.management import ManagementSpec
from agent.host import Host
from agent.state import STATE_DIR

log = logging.getLogger(__name__)

CREDENTIALS_DIR = f"{STATE_DIR}/credentials"


def store_credentials(spec: ManagementSpec, host: Host) -> ManagementSpec:
    """`spec` with every `*Data` credential written to CREDENTIALS_DIR and replaced by
    the file's path. A file that already holds the same bytes is left alone."""
    changes: dict[str, str | None] = {}
    for data_attr, file_attr, name in (("kubeconfig_data", "kubeconfig", "kubeconfig"),
                                       ("token_data", "token_file", "token"),
                                       ("ca_data", "ca_file", "ca.crt")):
        data: str | None = getattr(spec, data_attr)
        if data is None:
            continue
        path = f"{CREDENTIALS_DIR}/{name}"
        text = data.strip() + "\n"
        # The state directory first: made as a parent of CREDENTIALS_DIR it would get
        # the default 0755, and keep it.
        host.make_dir(STATE_DIR, mode=0o700)
        host.make_dir(CREDENTIALS_DIR, mode=0o700)
        if _current(host, path) != text:
            host.write_file(path, text, mode=0o600, dir_mode=0o700)
            log.info("stored the management cluster credential %s (from "
                     "spec.management.%s)", path, _key(data_attr))
        changes[file_attr] = path
        changes[data_attr] = None
    return dataclasses.replace(spec, **changes) if changes else spec  # type: ignore[arg-type]


def _current(host: Host, path: str) -> str | None:
    try:
        return host.read_text(path)
    except (OSError, UnicodeDecodeError):
        return None


def _key(attr: str) -> str:
    head, *rest = attr.split("_")
    return head + "".join(part.capitalize() for part in rest)
