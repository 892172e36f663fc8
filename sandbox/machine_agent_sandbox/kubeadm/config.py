"""kubeadm's configuration files, read strictly per the real schema (kubeadm.k8s.io/v1beta3
and v1beta4): the JoinConfiguration, the InitConfiguration and ClusterConfiguration, and
the command line that names them."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import yaml

from machine_agent_sandbox.kubeadm.discovery import unpinned_token_discovery
from machine_agent_sandbox.kubeadm.node import EXIT_VALIDATION, Failed

# The JoinConfiguration schema: field -> type, per apis/kubeadm/v1beta3/types.go and
# v1beta4/types.go. A dict is a nested object; [x] a list of x; "str:str" a string map.
_TAINT = {"key": str, "value": str, "effect": str, "timeAdded": str}
_BOOTSTRAP_TOKEN = {"token": str, "apiServerEndpoint": str, "caCertHashes": [str],
                    "unsafeSkipCAVerification": bool}
_CONTROL_PLANE = {"localAPIEndpoint": {"advertiseAddress": str, "bindPort": int},
                  "certificateKey": str}
_COMMON_REG = {"name": str, "criSocket": str, "taints": [_TAINT],
               "ignorePreflightErrors": [str], "imagePullPolicy": str}
SCHEMAS: dict[str, dict[str, Any]] = {
    "kubeadm.k8s.io/v1beta3": {
        "apiVersion": str, "kind": str, "caCertPath": str, "skipPhases": [str],
        "patches": {"directory": str}, "controlPlane": _CONTROL_PLANE,
        "nodeRegistration": {**_COMMON_REG, "kubeletExtraArgs": "str:str"},
        "discovery": {"bootstrapToken": _BOOTSTRAP_TOKEN,
                      "file": {"kubeConfigPath": str}, "tlsBootstrapToken": str,
                      "timeout": str},
    },
    "kubeadm.k8s.io/v1beta4": {
        "apiVersion": str, "kind": str, "dryRun": bool, "caCertPath": str,
        "skipPhases": [str], "patches": {"directory": str}, "controlPlane": _CONTROL_PLANE,
        "nodeRegistration": {**_COMMON_REG, "imagePullSerial": bool,
                             "kubeletExtraArgs": [{"name": str, "value": str}]},
        "discovery": {"bootstrapToken": _BOOTSTRAP_TOKEN,
                      "file": {"kubeConfigPath": str}, "tlsBootstrapToken": str},
        "timeouts": {k: str for k in ("controlPlaneComponentHealthCheck",
                                      "kubeletHealthCheck", "kubernetesAPICall",
                                      "etcdAPICall", "tlsBootstrap", "discovery",
                                      "upgradeManifests")},
    },
}
_ANY = object
"""A subtree the stand-in does not check field by field (extra volumes, etcd options)."""
_ARGS3, _ARGS4 = "str:str", [{"name": str, "value": str}]
_LOCAL_ENDPOINT = {"advertiseAddress": str, "bindPort": int}
_BOOTSTRAP_TOKENS = [{"token": str, "description": str, "ttl": str, "expires": str,
                      "usages": [str], "groups": [str]}]


def _init_schema(args: Any, v4: bool) -> dict[str, Any]:
    """InitConfiguration, apis/kubeadm/v1beta3|v1beta4/types.go."""
    schema: dict[str, Any] = {
        "apiVersion": str, "kind": str, "bootstrapTokens": _BOOTSTRAP_TOKENS,
        "nodeRegistration": {**_COMMON_REG, "kubeletExtraArgs": args},
        "localAPIEndpoint": _LOCAL_ENDPOINT, "certificateKey": str, "skipPhases": [str],
        "patches": {"directory": str}}
    if v4:
        schema["nodeRegistration"]["imagePullSerial"] = bool
        schema.update(dryRun=bool, timeouts=SCHEMAS["kubeadm.k8s.io/v1beta4"]["timeouts"])
    return schema


def _cluster_schema(args: Any, v4: bool) -> dict[str, Any]:
    """ClusterConfiguration, apis/kubeadm/v1beta3|v1beta4/types.go."""
    component = {"extraArgs": args, "extraVolumes": [_ANY]}
    if v4:
        component["extraEnvs"] = [_ANY]
    schema: dict[str, Any] = {
        "apiVersion": str, "kind": str, "etcd": {"local": _ANY, "external": _ANY},
        "networking": {"serviceSubnet": str, "podSubnet": str, "dnsDomain": str},
        "kubernetesVersion": str, "controlPlaneEndpoint": str,
        "apiServer": {**component, "certSANs": [str],
                      **({} if v4 else {"timeoutForControlPlane": str})},
        "controllerManager": component, "scheduler": component,
        "dns": {"imageRepository": str, "imageTag": str, **({"disabled": bool} if v4 else {})},
        "certificatesDir": str, "imageRepository": str, "featureGates": _ANY,
        "clusterName": str}
    if v4:
        schema.update(proxy={"disabled": bool}, encryptionAlgorithm=str,
                      certificateValidityPeriod=str, caCertificateValidityPeriod=str)
    return schema


INIT_SCHEMAS = {"kubeadm.k8s.io/v1beta3": _init_schema(_ARGS3, False),
                "kubeadm.k8s.io/v1beta4": _init_schema(_ARGS4, True)}
CLUSTER_SCHEMAS = {"kubeadm.k8s.io/v1beta3": _cluster_schema(_ARGS3, False),
                   "kubeadm.k8s.io/v1beta4": _cluster_schema(_ARGS4, True)}
_TOKEN = re.compile(r"^[a-z0-9]{6}\.[a-z0-9]{16}$")
# app/util/config/common.go, validateSupportedVersion: versions kubeadm names a release for.
OLD_API_VERSIONS = {"kubeadm.k8s.io/v1alpha1": "v1.11", "kubeadm.k8s.io/v1alpha2": "v1.12",
                    "kubeadm.k8s.io/v1alpha3": "v1.14", "kubeadm.k8s.io/v1beta1": "v1.15",
                    "kubeadm.k8s.io/v1beta2": "v1.22"}


def load_join_configuration(path: Path) -> dict[str, Any]:
    try:
        text = path.read_text()
    except OSError as err:
        raise Failed(f"unable to read config from {str(path)!r} : {err}") from err
    docs = [d for d in yaml.safe_load_all(text) if d]
    found = [d for d in docs if isinstance(d, dict) and d.get("kind") == "JoinConfiguration"]
    if not found:
        raise Failed("no JoinConfiguration found in the supplied config")
    doc = found[0]
    api = str(doc.get("apiVersion", ""))
    if api in OLD_API_VERSIONS:  # app/util/config/common.go, validateSupportedVersion
        raise Failed(f"your configuration file uses an old API spec: {json.dumps(api)} (kind: "
                     f"\"JoinConfiguration\"). Please use kubeadm {OLD_API_VERSIONS[api]} "
                     "instead and run 'kubeadm config migrate --old-config old.yaml "
                     "--new-config new.yaml', which will write the new, similar spec using "
                     "a newer API version.")
    if api not in SCHEMAS:  # apimachinery's runtime.Scheme on an unregistered version
        raise Failed(f"no kind \"JoinConfiguration\" is registered for version \"{api}\" in "
                     "scheme \"k8s.io/kubernetes/cmd/kubeadm/app/apis/kubeadm/scheme/"
                     "scheme.go:31\"")
    problems = list(_strict(doc, SCHEMAS[api], ""))
    if problems:
        # app/util/config/strict/strict.go, VerifyUnmarshalStrict (kubeadm itself only
        # warns here unless validating; the stand-in is strict so that every config the
        # agent renders is proven schema-clean).
        group, version = api.split("/")
        raise Failed(f"error unmarshaling configuration schema.GroupVersionKind{{Group:"
                     f"\"{group}\", Version:\"{version}\", Kind:\"JoinConfiguration\"}}: "
                     f"strict decoding error: {', '.join(problems)}")
    discovery = doc.get("discovery") or {}
    if bool(discovery.get("bootstrapToken")) == bool(discovery.get("file")):
        # app/apis/kubeadm/validation/validation.go ValidateDiscovery: a field error list,
        # returned as an Aggregate before any phase runs: exit status 3.
        raise Failed("discovery: Invalid value: \"\": bootstrapToken or file must be set",
                     EXIT_VALIDATION)
    problem = unpinned_token_discovery(discovery.get("bootstrapToken"))
    if problem:
        raise Failed(problem, EXIT_VALIDATION)
    return doc


def load_init_configuration(path: Path) -> tuple[dict[str, Any], dict[str, Any]]:
    """The InitConfiguration and ClusterConfiguration of `kubeadm init --config`
    (app/util/config/initconfiguration.go LoadInitConfigurationFromFile: documents by
    kind, strict per their version's schema, then validated)."""
    try:
        text = path.read_text()
    except OSError as err:
        raise Failed(f"unable to read config from {str(path)!r} : {err}") from err
    docs = [d for d in yaml.safe_load_all(text) if isinstance(d, dict)]
    found: dict[str, dict[str, Any]] = {}
    for doc in docs:
        kind, api = str(doc.get("kind", "")), str(doc.get("apiVersion", ""))
        if kind not in ("InitConfiguration", "ClusterConfiguration"):
            continue
        if api in OLD_API_VERSIONS:
            raise Failed(f"your configuration file uses an old API spec: {json.dumps(api)} "
                         f"(kind: \"{kind}\"). Please use kubeadm {OLD_API_VERSIONS[api]} "
                         "instead and run 'kubeadm config migrate --old-config old.yaml "
                         "--new-config new.yaml', which will write the new, similar spec "
                         "using a newer API version.")
        schemas = INIT_SCHEMAS if kind == "InitConfiguration" else CLUSTER_SCHEMAS
        if api not in schemas:
            raise Failed(f"no kind \"{kind}\" is registered for version \"{api}\" in scheme "
                         "\"k8s.io/kubernetes/cmd/kubeadm/app/apis/kubeadm/scheme/"
                         "scheme.go:31\"")
        problems = _strict(doc, schemas[api], "")
        if problems:
            group, version = api.split("/")
            raise Failed(f"error unmarshaling configuration schema.GroupVersionKind{{Group:"
                         f"\"{group}\", Version:\"{version}\", Kind:\"{kind}\"}}: strict "
                         f"decoding error: {', '.join(problems)}")
        found[kind] = doc
    init_cfg = found.get("InitConfiguration", {})
    cluster_cfg = found.get("ClusterConfiguration", {})
    # app/apis/kubeadm/validation/validation.go ValidateInitConfiguration (an Aggregate)
    errors = []
    for i, entry in enumerate(init_cfg.get("bootstrapTokens") or []):
        token = str(entry.get("token", ""))
        if not _TOKEN.match(token):
            errors.append(f"bootstrapTokens[{i}].token: Invalid value: \"\": the bootstrap "
                          "token is invalid")
    endpoint = cluster_cfg.get("controlPlaneEndpoint")
    if endpoint is not None and not re.match(r"^[A-Za-z0-9.\-\[\]:]+(:\d+)?$", str(endpoint)):
        errors.append(f"controlPlaneEndpoint: Invalid value: {json.dumps(endpoint)}: "
                      "must be a valid host or host:port")
    if errors:
        raise Failed("[" + ", ".join(errors) + "]", EXIT_VALIDATION)
    return init_cfg, cluster_cfg


def _strict(value: Any, schema: Any, where: str) -> list[str]:
    if schema is _ANY:
        return []
    if isinstance(schema, dict):
        if not isinstance(value, dict):
            return [f"{where or 'JoinConfiguration'}: expected an object"]
        out: list[str] = []
        for key, item in value.items():
            path = f"{where}.{key}" if where else str(key)
            if key not in schema:
                out.append(f"unknown field \"{path}\"")
            elif item is not None:
                out.extend(_strict(item, schema[key], path))
        return out
    if isinstance(schema, list):
        if not isinstance(value, list):
            return [f"{where}: expected a list"]
        return [p for i, v in enumerate(value) for p in _strict(v, schema[0], f"{where}[{i}]")]
    if schema == "str:str":
        ok = isinstance(value, dict) and all(isinstance(v, str) for v in value.values())
        return [] if ok else [f"{where}: expected a map of strings"]
    if schema is int and isinstance(value, bool):
        return [f"{where}: expected an integer"]
    return [] if isinstance(value, schema) else [f"{where}: expected {schema.__name__}"]


def join_args(args: list[str]) -> tuple[str, set[str]]:
    config: str | None = None
    ignored: set[str] = set()
    while args:
        arg = args.pop(0)
        name, eq, value = arg.partition("=")
        if name in ("--config", "--ignore-preflight-errors") and not eq:
            value = args.pop(0) if args else ""
        if name == "--config":
            config = value
        elif name == "--ignore-preflight-errors":
            ignored |= {v.lower() for v in value.split(",") if v}
        elif name not in ("--v", "-v"):
            raise Failed(f"unknown flag: {name}")
    if not config:
        raise Failed("the stand-in joins only with --config")
    return config, ignored
