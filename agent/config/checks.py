"""Validity checks for values that end up in files, templates and command lines.

Each check returns what is wrong and how to fix it, or None. They are strict on purpose:
input is hostile until validated, and a newline in a host name must never add a line.
Patterns are applied with `fullmatch`: with `match`, `$` also matches before a trailing
newline, so "ntp.example\n" would pass.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Callable
from typing import Any

from agent.errors import SHOWN, shown

_LABEL = re.compile(r"^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$", re.I)
_DNS1123_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")
_DNS1123_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$")
_IFNAME = re.compile(r"^[A-Za-z0-9_.@-]{1,15}$")
"""A subset of what the kernel (dev_valid_name: under IFNAMSIZ bytes, no '/', no
whitespace) and systemd (ifname_valid: also no ':', which is the legacy alias syntax,
no '%') accept, which no renderer has to quote."""
_MAC = re.compile(r"^[0-9a-f]{2}(:[0-9a-f]{2}){5}$", re.I)
_SHA256 = re.compile(r"^[0-9a-f]{64}$")
_PATH = re.compile(r"^/[A-Za-z0-9._/@+:,=-]*$")


def _shown(value: Any) -> str:
    """The value for an error message: escaped, and at most SHOWN characters of it."""
    if not isinstance(value, str):
        return shown(value)
    cut = value[:SHOWN]
    tail = f" (first {SHOWN} of {len(value)} characters)" if len(value) > SHOWN else ""
    return '"' + cut.encode("unicode_escape").decode() + '"' + tail


def host_name(value: str) -> str | None:
    """An RFC 1123 host name (labels of letters, digits, hyphens), or an IP address."""
    if ip_address(value) is None:
        return None
    name = value[:-1] if value.endswith(".") else value
    if 0 < len(name) <= 253 and all(_LABEL.fullmatch(label) for label in name.split(".")):
        return None
    return f"{_shown(value)} is not a valid host name or IP address"


def fqdn(value: str) -> str | None:
    """A host name for /etc/hostname: RFC 1123, no IP address."""
    name = value[:-1] if value.endswith(".") else value
    if 0 < len(name) <= 253 and all(_LABEL.fullmatch(label) for label in name.split(".")):
        return None
    return f"{_shown(value)} is not a valid host name (letters, digits, '-' and '.')"


def ip_address(value: str) -> str | None:
    """An IP address. An IPv6 scope id (`%eth0`) only on a link-local address, naming an
    interface: Python's parser takes anything after `%`, newlines included."""
    try:
        addr = ipaddress.ip_address(value)
    except ValueError:
        return f"{_shown(value)} is not an IP address"
    scope = getattr(addr, "scope_id", None)
    if scope is not None and not (addr.is_link_local and _IFNAME.fullmatch(scope)):
        return (f"{_shown(value)} has a scope id where none is meaningful (only a "
                "link-local address takes one, naming an interface): give the address "
                "without '%...'")
    return mapped_v4(value, addr)


def mapped_v4(value: str, addr: ipaddress.IPv4Address | ipaddress.IPv6Address) -> str | None:
    """An IPv4-mapped IPv6 address (::ffff:192.0.2.1) is written as the IPv4 address."""
    if isinstance(addr, ipaddress.IPv6Address) and addr.ipv4_mapped is not None:
        return (f"{_shown(value)} is an IPv4-mapped IPv6 address: give the IPv4 address "
                f"{addr.ipv4_mapped}")
    return None


def no_scope(value: str) -> str | None:
    """An address with a prefix length or a network never takes an IPv6 scope id."""
    if "%" in value:
        return (f"{_shown(value)} has a scope id ('%...'), which an address with a prefix "
                "length or a network does not take: give it without")
    return None


def ip_interface(value: str) -> str | None:
    """An address with its prefix length, e.g. 192.0.2.10/24 or 2001:db8::10/64."""
    if "/" not in value:
        return f"{_shown(value)} needs a prefix length, e.g. 192.0.2.10/24"
    if (problem := no_scope(value)) is not None:
        return problem
    try:
        iface = ipaddress.ip_interface(value)
    except ValueError:
        return f"{_shown(value)} is not an address with prefix length (e.g. 192.0.2.10/24)"
    return mapped_v4(value, iface.ip)


def ip_network(value: str) -> str | None:
    if (problem := no_scope(value)) is not None:
        return problem
    try:
        ipaddress.ip_network(value, strict=True)
    except ValueError:
        return f"{_shown(value)} is not a network (e.g. 198.51.100.0/24, host bits zero)"
    return None


def interface_name(value: str) -> str | None:
    if not _IFNAME.fullmatch(value):
        return (f"{_shown(value)} is not a valid interface name (1-15 characters: "
                "letters, digits, '_', '-', '.', '@'; no ':', '/', '%' or spaces)")
    if value in (".", ".."):
        return f"{_shown(value)} is not a valid interface name (the kernel refuses it)"
    if value.isdigit():
        return (f"{_shown(value)} is not a valid interface name (systemd refuses names "
                "of digits only: they read as interface indexes)")
    if value in ("all", "default"):
        return (f"{_shown(value)} is not a valid interface name (systemd refuses it: "
                f"/proc/sys/net/*/conf/{value} holds the setting of every interface)")
    return None


_GLOB = re.compile(r"^[A-Za-z0-9_.@*?\[\]!-]{1,15}$")


def is_glob(value: str) -> bool:
    return any(c in value for c in "*?[")


def interface_name_or_glob(value: str) -> str | None:
    """A link's name, or a shell glob of names (`en*`), as netplan's match.name and
    networkd's Name= take it."""
    if not is_glob(value):
        return interface_name(value)
    if not _GLOB.fullmatch(value):
        return (f"{_shown(value)} is not a valid interface name or glob (1-15 characters: "
                "letters, digits, '_', '-', '.', '@' and the glob's '*', '?', '[...]')")
    return None


def mac_address(value: str) -> str | None:
    if _MAC.fullmatch(value):
        return None
    return f"{_shown(value)} is not a MAC address (aa:bb:cc:dd:ee:ff)"


def k8s_name(value: str) -> str | None:
    """A Kubernetes object name (DNS-1123 subdomain)."""
    if len(value) <= 253 and _DNS1123_SUBDOMAIN.fullmatch(value):
        return None
    return f"{_shown(value)} is not a valid Kubernetes name (lower case, digits, '-', '.')"


_CONFIGMAP_KEY = re.compile(r"^[-._a-zA-Z0-9]{1,253}$")


def configmap_key(value: str) -> str | None:
    """A ConfigMap data key, as the API server validates it (IsConfigMapKey)."""
    if _CONFIGMAP_KEY.fullmatch(value) and value not in (".", "..") \
            and not value.startswith(".."):
        return None
    return f"{_shown(value)} is not a ConfigMap key (letters, digits, '-', '_', '.')"


def k8s_namespace(value: str) -> str | None:
    if len(value) <= 63 and _DNS1123_LABEL.fullmatch(value):
        return None
    return f"{_shown(value)} is not a valid namespace (lower case, digits, '-')"


_LABEL_NAME = re.compile(r"^[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$")


def label_key(value: str) -> str | None:
    """A Kubernetes label key: an optional DNS prefix and '/', then a name."""
    prefix, _, name = value.rpartition("/")
    if _LABEL_NAME.fullmatch(name) and (not prefix or k8s_name(prefix) is None):
        return None
    return f"{_shown(value)} is not a valid label key (e.g. machine-agent.io/host-uuid)"


def absolute_path(value: str) -> str | None:
    if _PATH.fullmatch(value) and "/../" not in value + "/" and "/./" not in value + "/":
        return None
    return (f"{_shown(value)} is not a plain absolute path "
            "(start with /; letters, digits and ._-@+:,= only)")


def https_url(value: str) -> str | None:
    from urllib.parse import urlsplit

    parts = urlsplit(value)
    if parts.scheme != "https" or not parts.hostname or any(c.isspace() for c in value):
        return f"{_shown(value)} is not an https:// URL"
    return None


def loopback_http_url(value: str) -> str | None:
    """An http:// URL on this node's loopback (the kubelet's healthz): nothing the agent
    sends there leaves the node, so plain HTTP is fine, and only there."""
    from urllib.parse import urlsplit

    parts = urlsplit(value)
    try:
        port = parts.port
    except ValueError:
        port = None
    if parts.scheme != "http" or parts.hostname not in ("127.0.0.1", "::1", "localhost") \
            or port is None or any(c.isspace() for c in value) or safe_text(value):
        return (f"{_shown(value)} is not an http:// URL on the loopback with a port "
                "(e.g. http://127.0.0.1:10248/healthz)")
    return None


def octal_mode(value: str) -> str | None:
    """A file mode as cloud-init's write_files gives it: octal text such as 0640."""
    if re.fullmatch(r"0?[0-7]{3,4}", value) and int(value, 8) <= 0o7777:
        return None
    return f"{_shown(value)} is not an octal mode such as 0640"


def file_owner(value: str) -> str | None:
    """user:group (or user), as cloud-init's write_files gives it."""
    if re.fullmatch(r"[a-z_][a-z0-9_-]*\$?(:[a-z_][a-z0-9_-]*\$?)?", value):
        return None
    return f"{_shown(value)} is not user:group"


def sha256(value: str) -> str | None:
    if _SHA256.fullmatch(value):
        return None
    return f"{_shown(value)} is not a sha256 (64 hex digits)"


def port(value: int) -> str | None:
    return None if 1 <= value <= 65535 else f"{value} is not a port (1-65535)"


def positive(value: float) -> str | None:
    return None if value > 0 else f"{value} must be greater than zero"


def safe_text(value: str) -> str | None:
    """Free text that will be written into a file: one line, no control characters."""
    if any(ord(c) < 32 or ord(c) == 127 for c in value):
        return f"{_shown(value)} contains a newline or control character"
    return None


# The CNI network name rule, as libcni enforces it (containernetworking/cni
# pkg/utils/utils.go, cniValidNameChars).
_CNI_NAME = re.compile(r"^[a-zA-Z0-9][a-zA-Z0-9_.\-]*$")
_FILE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,200}$")


def cni_network_name(value: str) -> str | None:
    if _CNI_NAME.match(value) and len(value) <= 200:
        return None
    return f"{_shown(value)} is not a CNI network name (letters, digits, '_', '.', '-')"


def plugin_type(value: str) -> str | None:
    """A CNI plugin `type`: it names a file in binDir, so a plain file name only."""
    if _FILE_NAME.match(value):
        return None
    return f"{_shown(value)} is not a plugin name (a file name in binDir: no '/')"


def conflist_name(value: str) -> str | None:
    if _FILE_NAME.match(value) and value.endswith(".conflist"):
        return None
    return f"{_shown(value)} is not a file name ending in .conflist"


def one_of(choices: tuple[str, ...]) -> Callable[[str], str | None]:
    def check(value: str) -> str | None:
        return None if value in choices else f"{_shown(value)} is not one of: " + ", ".join(
            choices)
    return check


_BEARER_TOKEN = re.compile(r"^[\x21-\x7e]{1,8192}$")
_PEM_CERTIFICATE = re.compile(
    r"^\s*(-----BEGIN CERTIFICATE-----\r?\n[A-Za-z0-9+/=\r\n]+-----END CERTIFICATE-----"
    r"\s*)+$")


def bearer_token(value: str) -> str | None:
    """A bearer token for an HTTP header: one word of visible ASCII. The message never
    shows the value (it is a secret)."""
    if _BEARER_TOKEN.fullmatch(value.strip()):
        return None
    return ("is not a bearer token (one word of visible ASCII characters, no spaces "
            "or control characters; the value is not shown)")


def pem_certificate(value: str) -> str | None:
    """One or more PEM certificates, and nothing else."""
    if _PEM_CERTIFICATE.fullmatch(value):
        return None
    return "is not PEM certificate text (-----BEGIN CERTIFICATE----- ... -----END ...)"


_BOOTSTRAP_TOKEN = re.compile(r"^[a-z0-9]{6}\.[a-z0-9]{16}$")
_K8S_VERSION = re.compile(r"^v?(\d+)\.(\d+)(\.\d+)?([-+][0-9A-Za-z.+-]+)?$")
_K8S_RELEASE = re.compile(r"^v(0|[1-9][0-9]{0,3})\.(0|[1-9][0-9]{0,3})\.(0|[1-9][0-9]{0,3})$")
_FLAG_NAME = re.compile(r"^[a-z0-9][a-z0-9-]*$")
_CHECK_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.:-]*$")


def bootstrap_token(value: str) -> str | None:
    """A kubeadm bootstrap token: `[a-z0-9]{6}.[a-z0-9]{16}` (never echoed back)."""
    if _BOOTSTRAP_TOKEN.fullmatch(value):
        return None
    return "is not a bootstrap token (6 and 16 lower-case letters or digits joined by '.')"


def ca_cert_hash(value: str) -> str | None:
    """A CA public key pin as kubeadm takes it: `sha256:` and 64 hex digits."""
    if value.startswith("sha256:") and _SHA256.fullmatch(value.removeprefix("sha256:").lower()):
        return None
    return f"{_shown(value)} is not a CA cert hash (sha256: and 64 hex digits)"


def hex_key(value: str) -> str | None:
    """A 32-byte key in hex (kubeadm's certificate key)."""
    if _SHA256.fullmatch(value.lower()):
        return None
    return "is not a 32-byte key in hex (64 hex digits)"


def k8s_version(value: str) -> str | None:
    if _K8S_VERSION.fullmatch(value):
        return None
    return f"{_shown(value)} is not a Kubernetes version (e.g. v1.31.2)"


def k8s_release(value: str) -> str | None:
    """A Kubernetes release as its binaries are named: vMAJOR.MINOR.PATCH."""
    if _K8S_RELEASE.fullmatch(value):
        return None
    return f"{_shown(value)} is not a Kubernetes release (vMAJOR.MINOR.PATCH, e.g. v1.31.3)"


def unix_socket_url(value: str) -> str | None:
    """A CRI endpoint: unix:///path/to.sock."""
    if value.startswith("unix://") and absolute_path(value.removeprefix("unix://")) is None:
        return None
    return f"{_shown(value)} is not a unix socket URL (e.g. unix:///run/containerd/containerd.sock)"


def command_name(value: str) -> str | None:
    """A program: a bare name looked up on PATH, or an absolute path."""
    if value.startswith("/"):
        return absolute_path(value)
    if re.fullmatch(r"[A-Za-z0-9._+-]+", value):
        return None
    return f"{_shown(value)} is not a program name or absolute path"


_SPLITS_FLAGS = re.compile(r"[\s\"'\\]")


def kubelet_args(value: dict[str, str]) -> str | None:
    """kubelet flags by name (no leading dashes) with one-word values: kubeadm writes
    them into one variable of /var/lib/kubelet/kubeadm-flags.env, which the kubelet unit
    splits at white space, so a value `a=b --kubeconfig=/tmp/x` would be two flags (and
    a quote or backslash would end the variable's quoting)."""
    for name, arg in value.items():
        if not _FLAG_NAME.fullmatch(name):
            return f"{_shown(name)} is not a kubelet flag name (lower case, digits, '-')"
        if problem := safe_text(arg):
            return f"value of {name}: {problem}"
        if _SPLITS_FLAGS.search(arg):
            return (f"value of {name}: {_shown(arg)} holds white space, a quote or a "
                    "backslash, which would split it into more kubelet flags (give one "
                    "word; lists are comma-separated)")
    return None


def preflight_check_name(value: str) -> str | None:
    if _CHECK_NAME.fullmatch(value):
        return None
    return f"{_shown(value)} is not a preflight check name (e.g. Swap, all)"


def label_value(value: str) -> str | None:
    """A Kubernetes label (or taint) value: up to 63 of [A-Za-z0-9-_.], may be empty."""
    if value == "" or _LABEL_NAME.fullmatch(value):
        return None
    return f"{_shown(value)} is not a valid label value (letters, digits, '-', '_', '.')"


def command_word(value: str) -> str | None:
    """One argument of a command line run without a shell: non-empty, one line."""
    if not value:
        return "an empty argument is not allowed"
    return safe_text(value)


def chronyc_address(value: str) -> str | None:
    """Where chronyc reaches chronyd: a Unix socket path or an IP address."""
    if value.startswith("/"):
        return absolute_path(value)
    if ip_address(value) is None:
        return None
    return f"{_shown(value)} is neither a socket path (/run/...) nor an IP address"


_DRIVER = re.compile(r"^[A-Za-z0-9_-]{1,32}$")


def driver_name(value: str) -> str | None:
    """A kernel driver name as `ethtool -i` shows it (e.g. virtio_net, ixgbe)."""
    if _DRIVER.fullmatch(value):
        return None
    return f"{_shown(value)} is not a driver name (letters, digits, '_' and '-')"


def join_host_port(host: str, port: int | str) -> str:
    """`host:port`, an IPv6 address in brackets: the form `host_port` accepts."""
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def host_port(value: str) -> str | None:
    """`host:port` or `[v6-address]:port`, e.g. 192.0.2.1:6443 or [2001:db8::1]:443."""
    host, sep, number = value.rpartition(":")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
        bad_host = ip_address(host) is not None or ":" not in host
    else:
        bad_host = ":" in host or host_name(host) is not None
    if not sep or bad_host or not number.isdigit() or port(int(number)) is not None:
        return (f"{_shown(value)} is not host:port "
                "(e.g. 192.0.2.1:6443, api.example.net:443, [2001:db8::1]:6443)")
    return None


def mtu(value: int) -> str | None:
    return None if 68 <= value <= 65535 else f"{value} is not an MTU (68-65535 bytes)"


def vlan_id(value: int) -> str | None:
    return None if 1 <= value <= 4094 else f"{value} is not a VLAN id (1-4094)"


def route_table(value: int) -> str | None:
    """A routing table id; 253 (default) and 255 (local) belong to the kernel."""
    if 1 <= value < 2**32 and value not in (253, 255):
        return None
    return f"{value} is not a usable routing table (1-4294967295, not 253 or 255)"


def route_destination(value: str) -> str | None:
    """`default` or a network with its prefix length."""
    return None if value == "default" else ip_network(value)


def small_count(value: int) -> str | None:
    return None if 0 <= value <= 10 else f"{value} is not between 0 and 10"


_KIND = re.compile(r"^[a-zA-Z]([-a-zA-Z0-9]*[a-zA-Z0-9])?$")


def k8s_kind(value: str) -> str | None:
    """A Kubernetes kind as an IPAM pool reference takes it (CAPI's poolRef.kind)."""
    if len(value) <= 63 and _KIND.fullmatch(value):
        return None
    return f"{_shown(value)} is not a valid kind (e.g. InClusterIPPool)"
