"""Installing the CNI plugin binaries from a local bundle or an https URL, safely.

A bundle is a flat tar.gz of plugin binaries (as upstream's cni-plugins-linux-*.tgz).
Its sha256 is checked before anything is written, and every member is checked before the
first file is staged: only regular files with plain names; absolute paths, `..`, links,
devices and subdirectories are refused. The files are staged in a private directory next
to binDir (same file system) and renamed into place one by one; a binDir that does not
exist yet is renamed into place whole.
"""

from __future__ import annotations

import hashlib
import io
import posixpath

from agent.config import checks
from agent.config.cni import PluginSource
from agent.errors import PermanentError, Reason, TemporaryError
from agent.host import Host
from agent.phases.base import Change
from agent.recordtype import record
from agent.tls import Trust, default_bundle, explain

MAX_BUNDLE = 512 * 1024 * 1024
"""Largest bundle accepted (bytes); upstream's full plugin set is about 50 MB."""

DOWNLOAD_TIMEOUT = 60.0


class BundleError(PermanentError):
    """The bundle cannot be installed as given: a person must fix it."""

    reason = Reason.CNIBroken


@record(frozen=True)
class Bundle:
    origin: str
    """The bundle's path or URL, for messages."""
    sha256: str
    files: dict[str, bytes]
    """Plugin name → content, read and checked in memory before anything is written."""


def fetch_bundle(host: Host, source: PluginSource) -> Bundle | None:
    """The bundle's checked contents; None when the plugins come with the image."""
    if source.source == "image":
        return None
    assert source.sha256 is not None  # the config requires it for bundle and url
    if source.source == "bundle":
        assert source.path is not None
        try:
            payload = host.read_bytes(source.path, limit=MAX_BUNDLE)
        except OSError as err:
            raise BundleError(f"cannot read the plugin bundle {source.path}: {err.strerror}",
                              hint="put the bundle in the image or fix spec.cni.plugins.path"
                              ) from err
        origin = source.path
    else:
        assert source.url is not None
        payload = download(host, source.url, "spec.cni.plugins.url",
                           "ship the plugins on the node (spec.cni.plugins.source: bundle)")
        origin = source.url
    actual = hashlib.sha256(payload).hexdigest()
    if actual != source.sha256:
        raise BundleError(
            f"plugin bundle {origin} has sha256 {actual}, expected {source.sha256}; "
            "nothing was installed",
            hint="fix spec.cni.plugins.sha256 or the bundle; never skip the check")
    return Bundle(origin, actual, read_plugins(payload, origin))


def download(host: Host, url: str, setting: str, instead: str) -> bytes:
    """The body of an https URL, TLS verified, at most MAX_BUNDLE bytes. For the fixes:
    `setting` names the URL's setting, `instead` how to do without the download."""
    import requests

    # The bundle REQUESTS_CA_BUNDLE names, else the system's trust store under the root.
    bundle = default_bundle(host.root, environment=True)
    try:
        with requests.get(url, stream=True, timeout=DOWNLOAD_TIMEOUT, verify=bundle) as resp:
            if resp.status_code != 200:
                raise TemporaryError(f"downloading {url} answered HTTP {resp.status_code}",
                                     reason=Reason.CNIBroken,
                                     hint="check the URL and the server; the agent retries")
            body = bytearray()
            for chunk in resp.iter_content(1 << 16):
                body += chunk
                if len(body) > MAX_BUNDLE:
                    raise BundleError(f"{url} is larger than {MAX_BUNDLE} bytes",
                                      hint=f"check {setting}")
            return bytes(body)
    except requests.exceptions.SSLError as err:
        problem, fix = explain(err, _trust(url, bundle, setting, instead))
        raise BundleError(f"TLS verification of {url} failed: {problem}", hint=fix) from err
    except requests.RequestException as err:
        raise TemporaryError(f"cannot download {url}: {err}", reason=Reason.CNIBroken,
                             hint="check the route and proxy; the agent retries") from err


def _trust(url: str, bundle: str, setting: str, instead: str) -> Trust:
    """How the download server is verified: against `bundle`, the system's trust store
    or the one the environment names."""
    from urllib.parse import urlsplit

    return Trust(trusted=bundle, name=urlsplit(url).hostname or "",
                 name_setting=setting,
                 ca_fix=f"the download server needs a certificate from a CA in {bundle}, "
                        f"or {instead}")


def read_plugins(payload: bytes, origin: str) -> dict[str, bytes]:
    """The regular files of a flat tar.gz; every hostile member is listed, none written."""
    import tarfile

    problems: list[str] = []
    files: dict[str, bytes] = {}
    try:
        with tarfile.open(fileobj=io.BytesIO(payload), mode="r:gz") as tar:
            for member in tar.getmembers():
                name, problem = _member_problem(member)
                if problem:
                    problems.append(f"{member.name!r}: {problem}")
                    continue
                if name is None:  # the top directory itself
                    continue
                if name in files:
                    problems.append(f"{member.name!r}: appears twice")
                    continue
                handle = tar.extractfile(member)
                assert handle is not None  # a regular file
                files[name] = handle.read()
    except (tarfile.TarError, EOFError, OSError) as err:
        raise BundleError(f"plugin bundle {origin} is not a readable tar.gz ({err})",
                          hint="give a .tar.gz of plugin binaries") from err
    if problems:
        raise BundleError(
            f"plugin bundle {origin} is refused; nothing was installed: " + "; ".join(problems),
            hint="a bundle holds only regular files at its top level (like upstream's "
                 "cni-plugins-linux-*.tgz)")
    if not files:
        raise BundleError(f"plugin bundle {origin} holds no files",
                          hint="give a .tar.gz of plugin binaries")
    return files


def _member_problem(member: object) -> tuple[str | None, str | None]:
    """(plain name or None for the top directory, problem or None)."""
    import tarfile

    assert isinstance(member, tarfile.TarInfo)
    raw = member.name
    if raw.startswith("/"):
        return None, "absolute path"
    parts = [p for p in raw.split("/") if p not in ("", ".")]
    if ".." in parts:
        return None, "path with '..' escapes the target"
    if member.issym() or member.islnk():
        return None, f"link to {member.linkname!r}; only regular files are installed"
    if member.isdir():
        return (None, None) if not parts else (None, "subdirectory; the bundle must be flat")
    if not member.isreg():
        return None, "not a regular file (device, fifo or other special file)"
    if len(parts) != 1:
        return None, "file in a subdirectory; the bundle must be flat"
    problem = checks.plugin_type(parts[0])
    return parts[0], problem


def install_change(host: Host, bin_dir: str, bundle: Bundle) -> Change | None:
    """The change that puts the bundle's files into binDir; None when they are there."""
    changed = sorted(name for name, data in bundle.files.items()
                     if not _same(host, f"{bin_dir}/{name}", data))
    if not changed:
        return None
    parent, base = posixpath.split(bin_dir.rstrip("/"))
    prefix = f".{base}.staging-"

    def install(h: Host) -> None:
        for leftover in h.list_dir(parent or "/"):  # from an interrupted earlier run
            if leftover.startswith(prefix):
                h.remove_tree(f"{parent}/{leftover}")
        fresh = not h.exists(bin_dir)
        staging = h.make_temp_dir(parent or "/", prefix)
        try:
            for name in changed:
                h.write_file(f"{staging}/{name}", bundle.files[name], mode=0o755)
            if fresh:
                h.make_dir(staging, 0o755)
                h.rename(staging, bin_dir)
                return
            for name in changed:
                h.rename(f"{staging}/{name}", f"{bin_dir}/{name}")
        finally:
            h.remove_tree(staging)

    diff = "".join(f"+ {bin_dir}/{name}\n" for name in changed)
    return Change(f"install:{bin_dir}:{bundle.sha256}",
                  f"install {len(changed)} plugin(s) from {bundle.origin} into {bin_dir}",
                  install, diff)


def _same(host: Host, path: str, data: bytes) -> bool:
    if not host.is_executable(path):
        return False
    return host.read_bytes(path) == data
