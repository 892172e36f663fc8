"""This machine's DMI identity (SMBIOS system UUID and serial number), read from
/sys/class/dmi/id under the Host root — the one place that reads it.

The kernel exposes `product_uuid` and `product_serial` root-only (mode 0400). Firmware
that was never given real values fills them with placeholders that many machines share
("To Be Filled By O.E.M.", an all-zero UUID, or the sequential 03000200-0400-0500-0006-
000700080009 of some boards); those are refused, since discovering a Machine by a value
other hosts also carry would hand this node someone else's identity.
"""

from __future__ import annotations

import re

from agent.errors import PermanentError, Reason
from agent.host import Host

DMI_DIR = "/sys/class/dmi/id"
PRODUCT_UUID = f"{DMI_DIR}/product_uuid"
PRODUCT_SERIAL = f"{DMI_DIR}/product_serial"

_UUID = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")
_PLACEHOLDER_UUIDS = frozenset({
    "00000000-0000-0000-0000-000000000000",
    "ffffffff-ffff-ffff-ffff-ffffffffffff",
    "03000200-0400-0500-0006-000700080009",
})
_PLACEHOLDER_SERIALS = frozenset({
    "", "0", "none", "n/a", "na", "default string", "not specified", "not applicable",
    "to be filled by o.e.m.", "system serial number", "0123456789", "123456789",
})
_HINT = "name the Machine in spec.identity.machine instead"


def _read(host: Host, path: str, what: str) -> str:
    try:
        text = host.read_text(path)
    except OSError as err:
        raise PermanentError(f"DMI: cannot read {path} ({what}): {err.strerror}",
                             reason=Reason.MachineNotFound,
                             hint="run the agent as root (the file is root-only), or "
                                  + _HINT) from err
    except UnicodeDecodeError as err:
        raise PermanentError(f"DMI: {path} ({what}) is not text",
                             reason=Reason.MachineNotFound, hint=_HINT) from err
    if text is None:
        raise PermanentError(f"DMI: {path} ({what}) does not exist: this machine's "
                             "firmware exposes no DMI table", reason=Reason.MachineNotFound,
                             hint=_HINT)
    return text.strip()


def product_uuid(host: Host) -> str:
    """The SMBIOS system UUID, lower case; an error naming the file when it is missing,
    malformed or a placeholder."""
    value = _read(host, PRODUCT_UUID, "the product UUID").lower()
    if not _UUID.fullmatch(value):
        raise PermanentError(f"DMI: {PRODUCT_UUID} holds {value[:64]!r}, not a UUID",
                             reason=Reason.MachineNotFound, hint=_HINT)
    if value in _PLACEHOLDER_UUIDS:
        raise PermanentError(
            f"DMI: {PRODUCT_UUID} holds the placeholder {value}, which other machines "
            "share; it cannot identify this one", reason=Reason.MachineNotFound,
            hint="set a system UUID in the firmware, or " + _HINT)
    return value


def product_serial(host: Host) -> str:
    """The system serial number as the firmware wrote it (stripped); an error naming the
    file when it is missing or a placeholder."""
    value = _read(host, PRODUCT_SERIAL, "the serial number")
    if value.lower() in _PLACEHOLDER_SERIALS:
        raise PermanentError(
            f"DMI: {PRODUCT_SERIAL} holds the placeholder {value!r}, which other machines "
            "share; it cannot identify this one", reason=Reason.MachineNotFound,
            hint="set a serial number in the firmware, or " + _HINT)
    return value
