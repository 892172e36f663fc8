"""cloud-init's instance data as a configuration source: the agent works on every
platform cloud-init knows (NoCloud, ConfigDrive, OpenStack, VMware, ...) without
reimplementing a datasource.

What it reads, all under the Host root:
- `/run/cloud-init/instance-data-sensitive.json` (root-only, unredacted; what
  `cloud-init query` reads as root), else the world-readable `instance-data.json` (older
  cloud-init); the datasource's metadata is under `ds.meta_data`, the instance under `v1`.
- the metadata key `ds.meta_data["machine-agent"]`: an AgentConfig as a mapping or as YAML
  text (NoCloud meta-data, VMware guestinfo metadata, ... carry either). Origin
  `cloud-init meta-data key machine-agent`.
- user-data, which instance-data does not hold: cloud-init keeps it raw (mode 0600) in
  `/var/lib/cloud/instances/IID/user-data.txt`, IID being `v1.instance_id` with `/` made
  `_` (cloudinit/helpers.py Paths._get_ipath). That path, not the `instance` symlink, is
  read: the symlink is absolute, so under another root it would point at the machine
  the agent runs on, and it can be stale while instance-data is current. Every MIME part
  of type `application/x-machine-agent+yaml` (or `text/x-machine-agent+yaml`, the type
  `cloud-init devel make-mime -a FILE:x-machine-agent+yaml --force` writes) is a fragment,
  in order, origin `cloud-init user-data (part FILENAME)`. cloud-init itself logs
  "Unhandled unknown content-type" for these parts and leaves them alone. Gzip-compressed
  user-data is unpacked first; user-data without `MIME-Version:` in its first 4 KiB is not
  MIME (cloudinit/user_data.py convert_string) and has no part for the agent.
  `#include` URLs are not followed.

Metadata comes before user-data (user-data, chosen per instance, wins).

cloud-init writes these during its `init` stage. When /run/cloud-init exists (cloud-init
runs on this boot) but that stage has not finished — neither `result.json` (all stages
done) nor `init.finished` in `status.json` — the source waits, saying so every
PROGRESS_EVERY seconds, up to `wait` seconds, then fails (temporary: a later run may find
it done). Waiting for the `init` stage, not for `result.json`, lets the agent run from
cloud-init's own final stage (runcmd) without waiting for itself. No /run/cloud-init, or
`/run/cloud-init/disabled`: cloud-init does not run here, and there are no fragments.
"""

from __future__ import annotations

import json
import logging
import posixpath
import zlib
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from agent import records
from agent.config.fragment import Fragment, parse_fragment
from agent.errors import FieldError, Reason, TemporaryError
from agent.host import Host
from agent.recordtype import record

if TYPE_CHECKING:
    from email.message import Message

log = logging.getLogger(__name__)

RUN_DIR = "/run/cloud-init"
SENSITIVE = f"{RUN_DIR}/instance-data-sensitive.json"
REDACTED = f"{RUN_DIR}/instance-data.json"
RESULT = f"{RUN_DIR}/result.json"
STATUS = f"{RUN_DIR}/status.json"
DISABLED = f"{RUN_DIR}/disabled"
INSTANCES = "/var/lib/cloud/instances"
PART_TYPES = ("application/x-machine-agent+yaml", "text/x-machine-agent+yaml")
METADATA_KEY = "machine-agent"
DEFAULT_WAIT = 300.0
PROGRESS_EVERY = 10.0
POLL = 1.0
MAX_USER_DATA = 16 * 1024 * 1024
"""Unpacked user-data larger than this is refused (a gzip bomb, not a config)."""
_REDACTED_VALUE = "redacted for non-root user"  # cloudinit/sources/__init__.py


@record(frozen=True)
class CloudInitSource:
    """AgentConfig fragments from cloud-init's instance data (module docstring)."""

    wait: float = DEFAULT_WAIT

    def fragments(self, host: Host, errors: list[FieldError]) -> Iterable[Fragment]:
        if not host.exists(RUN_DIR) or host.exists(DISABLED):
            return []
        self._wait_until_done(host)
        data, data_file = _instance_data(host, errors)
        if data is None:
            return []
        out: list[Fragment] = []
        out.extend(_metadata_fragment(data, data_file, errors))
        out.extend(_user_data_fragments(host, data, data_file, errors))
        return out

    def _wait_until_done(self, host: Host) -> None:
        clock = host.clock
        start = clock.monotonic()
        said = start - PROGRESS_EVERY
        while True:
            stage = _unfinished_stage(host)
            if stage is None:
                return
            waited = clock.monotonic() - start
            if waited >= self.wait:
                raise TemporaryError(
                    f"cloud-init has not finished its init stage after {waited:.0f}s "
                    f"({stage}); its instance data may still change",
                    reason=Reason.CloudInitNotFinished,
                    hint="check `cloud-init status --long`; if it is only slow, raise "
                         "--cloud-init-wait; running the agent again picks it up")
            if clock.monotonic() - said >= PROGRESS_EVERY:
                log.info("waiting for cloud-init to finish its init stage (%s): "
                         "%.0fs of at most %.0fs", stage, waited, self.wait)
                said = clock.monotonic()
            clock.sleep(min(POLL, max(0.0, self.wait - waited)))


def _unfinished_stage(host: Host) -> str | None:
    """None when cloud-init's init stage is done; else what it is doing, for messages."""
    if host.exists(RESULT):
        return None
    try:
        status = records.loads(host.read_text(STATUS) or "{}").get("v1") or {}
    except (OSError, ValueError, AttributeError):
        # Written atomically by cloud-init, so a bad read is a moment before it exists.
        return f"{STATUS} not readable yet"
    init = status.get("init") if isinstance(status, dict) else None
    if isinstance(init, dict) and init.get("finished"):
        return None
    stage = status.get("stage") if isinstance(status, dict) else None
    return f"stage {stage}" if stage else f"no {RESULT} yet"


def _instance_data(host: Host,
                   errors: list[FieldError]) -> tuple[dict[str, Any] | None, str]:
    """The parsed instance data and the file it came from."""
    path = SENSITIVE if host.exists(SENSITIVE) else REDACTED
    origin = f"cloud-init ({path})"
    try:
        text = host.read_text(path)
    except (OSError, UnicodeDecodeError) as err:
        hint = "run the agent as root" if isinstance(err, PermissionError) else None
        errors.append(FieldError("(file)", f"cannot read: {err}", hint, origin=origin))
        return None, path
    if text is None:
        errors.append(FieldError("(file)", "does not exist, though cloud-init has run",
                                 "check `cloud-init status --long` and its log",
                                 origin=origin))
        return None, path
    try:
        data = records.loads(text)
    except ValueError as err:
        errors.append(FieldError("(file)", f"is not valid JSON: {err}", origin=origin))
        return None, path
    if not isinstance(data, dict):
        errors.append(FieldError("(file)", "is not a JSON object", origin=origin))
        return None, path
    return data, path


def _metadata_fragment(data: dict[str, Any], data_file: str,
                       errors: list[FieldError]) -> Iterable[Fragment]:
    meta = (data.get("ds") or {}).get("meta_data")
    if not isinstance(meta, dict) or METADATA_KEY not in meta:
        return []
    origin = f"cloud-init meta-data key {METADATA_KEY}"
    value = meta[METADATA_KEY]
    if value == _REDACTED_VALUE:
        errors.append(FieldError(f"ds.meta_data.{METADATA_KEY}",
                                 f"is redacted in {data_file}",
                                 f"run the agent as root so it can read {SENSITIVE}",
                                 origin=origin))
        return []
    if isinstance(value, str):
        fragment = parse_fragment(value, origin, errors)
        return [fragment] if fragment else []
    if isinstance(value, dict):
        fragment = parse_fragment(json.dumps(value), origin, errors)
        return [fragment] if fragment else []
    errors.append(FieldError(f"ds.meta_data.{METADATA_KEY}",
                             "is neither an AgentConfig mapping nor YAML text",
                             origin=f"{origin} ({data_file})"))
    return []


def _user_data_fragments(host: Host, data: dict[str, Any], data_file: str,
                         errors: list[FieldError]) -> Iterable[Fragment]:
    v1 = data.get("v1") or {}
    iid = v1.get("instance_id") if isinstance(v1, dict) else None
    if not isinstance(iid, str) or not iid or iid in (".", "..") or "\0" in iid:
        errors.append(FieldError("v1.instance_id", f"is missing or not usable ({iid!r})",
                                 origin=f"cloud-init ({data_file})"))
        return []
    path = f"{INSTANCES}/{iid.replace('/', '_')}/user-data.txt"
    origin = f"cloud-init user-data ({path})"
    try:
        raw = host.read_bytes(path, limit=MAX_USER_DATA)
    except FileNotFoundError:
        errors.append(FieldError("(file)", f"does not exist, though {data_file} names "
                                 f"instance {iid!r}", "check `cloud-init status --long`",
                                 origin=origin))
        return []
    except OSError as err:
        errors.append(FieldError("(file)", f"cannot read: {err}", origin=origin))
        return []
    try:
        raw = _gunzip(raw)
    except ValueError as err:
        errors.append(FieldError("(file)", str(err), origin=origin))
        return []
    if b"mime-version:" not in raw[:4096].lower():
        return []
    import email  # lazy: ~7 ms of imports, for MIME user-data only
    import email.policy

    message = email.message_from_bytes(raw, policy=email.policy.compat32)
    out: list[Fragment] = []
    for index, part in enumerate(message.walk(), start=1):
        if part.get_content_type() not in PART_TYPES:
            continue
        part_origin = f"cloud-init user-data (part {_part_name(part, index)})"
        text = _part_text(part)
        if text is None:
            errors.append(FieldError("(part)", "is not UTF-8 text", origin=part_origin))
            continue
        fragment = parse_fragment(text, part_origin, errors)
        if fragment is not None:
            out.append(fragment)
    return out


def _gunzip(raw: bytes) -> bytes:
    """Unpack gzip (what cloud-init's decomp_gzip accepts), bounded in size."""
    if not raw.startswith(b"\x1f\x8b"):
        return raw
    unpacker = zlib.decompressobj(wbits=16 + zlib.MAX_WBITS)
    try:
        out = unpacker.decompress(raw, MAX_USER_DATA + 1)
    except zlib.error as err:
        raise ValueError(f"is gzip data that does not unpack: {err}") from err
    if len(out) > MAX_USER_DATA:
        raise ValueError(f"unpacks to more than {MAX_USER_DATA} bytes")
    return out


def _part_name(part: Message, index: int) -> str:
    """The part's file name without directories (make-mime writes the path it was
    given), or its position."""
    name = posixpath.basename(part.get_filename() or "")
    if name and name.isprintable() and len(name) <= 100:
        return name
    return str(index)


def _part_text(part: Message) -> str | None:
    payload = part.get_payload(decode=True)
    if not isinstance(payload, bytes):
        return None
    try:
        return payload.decode(part.get_content_charset() or "utf-8")
    except (UnicodeDecodeError, LookupError):
        return None


NETWORK_CONFIG = "network-config.json"
"""The network configuration cloud-init found (the datasource's, or its system
configuration's), written by cloud-init 23.4 and later into the instance directory
when its network configuration is not disabled (stages.py _write_network_config_json)."""


def datasource_network_config(host: Host, errors: list[FieldError]
                              ) -> tuple[Any, str] | None:
    """(the document, the file it came from) of the network configuration cloud-init
    found for this instance; None, with the reason in `errors`, when there is none.
    Read by instance id, as user-data is (module docstring)."""
    data, data_file = _instance_data(host, errors)
    if data is None:
        return None
    v1 = data.get("v1") or {}
    iid = v1.get("instance_id") if isinstance(v1, dict) else None
    if not isinstance(iid, str) or not iid or iid in (".", "..") or "\0" in iid:
        errors.append(FieldError("v1.instance_id", f"is missing or not usable ({iid!r})",
                                 origin=f"cloud-init ({data_file})"))
        return None
    path = f"{INSTANCES}/{iid.replace('/', '_')}/{NETWORK_CONFIG}"
    try:
        text = host.read_text(path)
    except (OSError, UnicodeDecodeError) as err:
        errors.append(FieldError("(file)", f"cannot read: {err}",
                                 origin=f"cloud-init ({path})"))
        return None
    if text is None:
        errors.append(FieldError(
            "spec.network.networkConfigFrom",
            f"cloud-init wrote no network configuration ({path} does not exist)",
            "cloud-init 23.4 or later writes it, and only when its network configuration "
            "is not disabled: remove `network: {config: disabled}` from "
            "/etc/cloud/cloud.cfg.d (docs/network-config-v2.md)"))
        return None
    try:
        return records.loads(text), path
    except ValueError as err:
        errors.append(FieldError("(file)", f"is not valid JSON: {err}",
                                 origin=f"cloud-init ({path})"))
        return None
