"""Credentials for the management cluster: from a kubeconfig, or a server URL, token file
and CA file (`spec.management`).

requests wants files for the CA bundle and the client certificate, so certificate and
key *data* from a kubeconfig are written through the Host to `/run/machine-agent/kube/`
(tmpfs on a real node: key material does not outlive a reboot), mode 0600.

TLS is always verified. `insecure-skip-tls-verify` in a kubeconfig is refused unless
`spec.management.insecureSkipTLSVerify` says so too, and then every start warns loudly.
A cluster's `tls-server-name` (as kubectl's) is the name the server's certificate is
verified against, and sent as SNI, when the URL's host is not in the certificate: a
server reached through a relay or a load balancer's address.
"""

from __future__ import annotations

import base64
import binascii
import dataclasses
import logging
import os
import posixpath
from collections.abc import Mapping
from dataclasses import field
from typing import Any

from agent.config import checks
from agent.config.management import ManagementSpec
from agent.errors import PermanentError, Reason
from agent.host import Host
from agent.kube.bearer import MAX_TOKEN_FILE, TOKEN_FIX, token_problem
from agent.logs import REDACT
from agent.proxy import ProxySettings, ProxyURLInvalid, from_environment, parse_proxy_url
from agent.recordtype import record
from agent.tls import default_bundle

log = logging.getLogger(__name__)

MATERIAL_DIR = "/run/machine-agent/kube"


@record(frozen=True)
class Credentials:
    """How to reach and authenticate to the API server. Paths are real file paths."""

    server: str
    token: str | None = field(default=None, repr=False)
    client_cert: str | None = None
    client_key: str | None = None
    ca_file: str | None = None
    insecure: bool = False
    tls_server_name: str | None = None
    """The name to verify the server's certificate against instead of the URL's host."""
    trust_store: str | None = None
    """The operating system's CA bundle (agent.tls.default_bundle), used without ca_file
    (and only then looked up)."""
    proxy_url: str | None = field(default=None, repr=False)
    """A kubeconfig cluster's proxy-url (checked by agent.proxy.parse_proxy_url): every
    request to this server goes through it; without it, the environment's proxies
    (agent.proxy.from_environment)."""
    token_file: str | None = None
    """The real path the token was read from (spec.management.tokenFile, a kubeconfig
    user's tokenFile): read again on every 401 (agent.kube.client), as client-go does,
    so a rotated token (a projected service account token, a renewed file) is used
    without a restart."""

    @property
    def verify(self) -> bool | str:
        """requests' `verify=`: the CA file, the system store, or (insecure) nothing."""
        if self.insecure:
            return False
        return self.ca_file or self.trust_store or True

    @property
    def cert(self) -> tuple[str, str] | None:
        if self.client_cert and self.client_key:
            return (self.client_cert, self.client_key)
        return None


def proxy_settings(creds: Credentials, environ: Mapping[str, str] | None = None
                   ) -> ProxySettings:
    """The proxies requests to `creds.server` take: its kubeconfig's proxy-url, else the
    agent's environment (HTTPS_PROXY, NO_PROXY, ...: a systemd drop-in's Environment=)."""
    try:
        return from_environment(os.environ if environ is None else environ,
                                explicit=creds.proxy_url)
    except ProxyURLInvalid as err:
        raise PermanentError(f"the agent's environment: {err}", reason=Reason.ConfigInvalid,
                             hint="fix or unset the variable (the unit's Environment= or "
                                  "a drop-in)") from err


def _bad(where: str, message: str, hint: str) -> PermanentError:
    return PermanentError(f"{where}: {message}", reason=Reason.ConfigInvalid, hint=hint)


def load_credentials(spec: ManagementSpec, host: Host, *,
                     material: Host | None = None) -> Credentials:
    """Credentials from `spec.management`; raises a ConfigInvalid error saying what is
    missing or refused. Key material from a kubeconfig's `*-data` goes to `material`
    (default: `host`); `doctor` hands in a scratch Host, since it must change nothing."""
    if spec.kubeconfig:
        creds = _from_kubeconfig(spec.kubeconfig, host, spec.insecure_skip_tls_verify,
                                 material or host)
    elif spec.server:
        creds = _from_files(spec, host)
    else:
        raise _bad("spec.management", "neither kubeconfig nor server is set",
                   "set spec.management.kubeconfig, or server with tokenFile and caFile")
    # Without a CA of its own, the server is verified against the operating system's
    # trust store (a site CA installed in the image), not requests' certifi bundle. Only
    # then: without a system store, finding certifi's bundle imports importlib.resources
    # and zipfile (~1 MiB of a bootstrap's peak) for a file that would not be used.
    if creds.ca_file is None and not creds.insecure:
        creds = dataclasses.replace(creds, trust_store=default_bundle(host.root))
    if creds.insecure:
        log.warning("TLS VERIFICATION OF THE MANAGEMENT CLUSTER IS DISABLED "
                    "(spec.management.insecureSkipTLSVerify): anyone on the path can "
                    "impersonate %s; never do this in production", creds.server)
    return creds


MAX_FILE = 4 << 20
"""A kubeconfig or CA bundle bigger than this is not one (a system trust store is ~200 KiB)."""


def _read(host: Host, path: str, where: str, limit: int = MAX_FILE) -> str:
    try:
        text = host.read_text(path, limit=limit)
    except OSError as err:
        raise _bad(where, f"cannot read {path}: {err.strerror}",
                   "check the file and its permissions") from err
    if text is None:
        raise _bad(where, f"{path} does not exist", "create it or fix the path")
    return text


def _from_files(spec: ManagementSpec, host: Host) -> Credentials:
    assert spec.server is not None and spec.token_file is not None
    token = _token(_read(host, spec.token_file, "spec.management.tokenFile",
                         MAX_TOKEN_FILE), "spec.management.tokenFile", spec.token_file)
    ca = None
    if spec.ca_file:
        _read(host, spec.ca_file, "spec.management.caFile")
        ca = str(host.path(spec.ca_file))
    return Credentials(spec.server, token=token, ca_file=ca,
                       insecure=spec.insecure_skip_tls_verify,
                       token_file=str(host.path(spec.token_file)))


def _token(text: str, where: str, source: str) -> str:
    """The token in `text`, registered for redaction; refused naming `source` (its file)
    and never showing the value."""
    token = text.strip()
    REDACT.add(token)  # before any message could hold it
    problem = token_problem(token)
    if problem:
        raise _bad(where, f"the token in {source} {problem}", TOKEN_FIX)
    return token


def _named(doc: dict[str, Any], kind: str, name: str, where: str) -> dict[str, Any]:
    for entry in doc.get(kind) or []:
        if isinstance(entry, dict) and entry.get("name") == name:
            body = entry.get(kind[:-1])
            if isinstance(body, dict):
                return body
    raise _bad(where, f"no {kind[:-1]} named {name!r}",
               f"add it under {kind}: or fix the current context")


def _from_kubeconfig(path: str, host: Host, allow_insecure: bool,
                     material: Host) -> Credentials:
    import yaml

    from agent import yamlsafe

    where = f"kubeconfig {path}"
    try:
        doc = yamlsafe.load(_read(host, path, where))
    except yaml.YAMLError as err:
        raise _bad(where, f"not valid YAML: {err}", "fix the kubeconfig") from err
    if not isinstance(doc, dict):
        raise _bad(where, "is not a kubeconfig (expected a mapping)", "fix the kubeconfig")
    current = doc.get("current-context")
    if not current:
        raise _bad(where, "has no current-context", "set current-context")
    context = _named(doc, "contexts", str(current), where)
    cluster = _named(doc, "clusters", str(context.get("cluster")), where)
    user = _named(doc, "users", str(context.get("user")), where) if context.get("user") else {}
    base = posixpath.dirname(path)
    server = str(cluster.get("server") or "")
    if not server.startswith("https://"):
        raise _bad(where, f"cluster server {server!r} is not an https:// URL",
                   "the agent talks to the management cluster over TLS only")
    for unsupported in ("exec", "auth-provider"):
        if unsupported in user:
            raise _bad(where, f"user uses {unsupported!r}, which the agent does not run",
                       "give the node a token or a client certificate instead")
    insecure = bool(cluster.get("insecure-skip-tls-verify"))
    if insecure and not allow_insecure:
        raise _bad(where, "sets insecure-skip-tls-verify; the agent always verifies TLS",
                   "give certificate-authority(-data), or set "
                   "spec.management.insecureSkipTLSVerify: true to accept the risk")
    token = user.get("token")
    token_file = None
    if token:
        token = _token(str(token), where, "the user's token")
    elif user.get("tokenFile"):
        token_file = _resolve(base, str(user["tokenFile"]))
        token = _token(_read(host, token_file, where, MAX_TOKEN_FILE), where, token_file)
    server_name = cluster.get("tls-server-name")
    problem = checks.host_name(str(server_name)) if server_name is not None else None
    if problem:
        raise _bad(where, f"tls-server-name: {problem}",
                   "give the name the server's certificate holds, without scheme or port")
    proxy_url = cluster.get("proxy-url")
    if proxy_url is not None:
        try:
            parse_proxy_url(str(proxy_url))
        except ProxyURLInvalid as err:
            raise _bad(where, f"proxy-url: {err}",
                       "write the proxy as http://[user:password@]host:port") from err
    return Credentials(
        server.rstrip("/"),
        token=str(token) if token else None,
        client_cert=_material(host, material, user, "client-certificate", base,
                              "client.crt", where),
        client_key=_material(host, material, user, "client-key", base, "client.key", where),
        ca_file=None if insecure else _material(host, material, cluster,
                                                "certificate-authority", base, "ca.crt",
                                                where),
        insecure=insecure,
        tls_server_name=str(server_name) if server_name else None,
        proxy_url=str(proxy_url) if proxy_url else None,
        token_file=str(host.path(token_file)) if token_file else None)


def _resolve(base: str, path: str) -> str:
    """Relative paths in a kubeconfig are relative to its directory (as kubectl does)."""
    return path if path.startswith("/") else posixpath.normpath(posixpath.join(base, path))


def _material(host: Host, material: Host, section: dict[str, Any], key: str, base: str,
              file_name: str, where: str) -> str | None:
    """A real path for `key` (a file) or `key-data` (base64, written under MATERIAL_DIR)."""
    data = section.get(f"{key}-data")
    if data:
        try:
            pem = base64.b64decode(str(data), validate=True).decode()
        except (binascii.Error, UnicodeDecodeError) as err:
            raise _bad(where, f"{key}-data is not base64 PEM", "fix the kubeconfig") from err
        if "PRIVATE KEY" in pem:
            REDACT.add(pem)
        target = f"{MATERIAL_DIR}/{file_name}"
        material.write_file(target, pem, mode=0o600, dir_mode=0o700)
        return str(material.path(target))
    if section.get(key):
        file = _resolve(base, str(section[key]))
        _read(host, file, where)
        return str(host.path(file))
    return None
