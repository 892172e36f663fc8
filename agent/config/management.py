"""`spec.management`: how to reach the management cluster."""

from __future__ import annotations

from collections.abc import Iterator

from agent.config import checks
from agent.config.fields import Duration, setting
from agent.recordtype import record

Problem = tuple[str, str, str | None]


@record(frozen=True)
class ManagementSpec:
    kubeconfig: str | None = setting(
        "Path of a kubeconfig for the management cluster.", default=None,
        check=checks.absolute_path)
    kubeconfig_data: str | None = setting(
        "A kubeconfig's text, instead of a file: for credentials delivered by cloud-init "
        "or a kernel command line config file. Written to "
        "/var/lib/machine-agent/credentials/kubeconfig (mode 0600).", default=None,
        secret=True)
    server: str | None = setting(
        "API server URL, used with tokenFile and caFile instead of a kubeconfig.",
        default=None, check=checks.https_url)
    token_file: str | None = setting("File holding a bearer token.", default=None,
                                     check=checks.absolute_path)
    token_data: str | None = setting(
        "A bearer token, instead of tokenFile. Written to "
        "/var/lib/machine-agent/credentials/token (mode 0600).", default=None, secret=True,
        check=checks.bearer_token)
    ca_file: str | None = setting("PEM file of the CA that signed the API server's certificate.",
                                  default=None, check=checks.absolute_path)
    ca_data: str | None = setting(
        "PEM of the API server's CA, instead of caFile. Written to "
        "/var/lib/machine-agent/credentials/ca.crt.", default=None, check=checks.pem_certificate)
    insecure_skip_tls_verify: bool = setting(
        "Accept any server certificate. Never in production; the agent warns loudly.",
        default=False, key="insecureSkipTLSVerify")
    request_timeout: Duration = setting("Time-out of one API request.",
                                        default=Duration(10), check=checks.positive)
    bootstrap_wait: Duration = setting(
        "How long to wait for the bootstrap data Secret (and Machine.spec.bootstrap."
        "dataSecretName) to appear.", default=Duration(600), check=checks.positive)

    def validate(self) -> Iterator[Problem]:
        for file_key, file_value, data_key, data_value in (
                ("kubeconfig", self.kubeconfig, "kubeconfigData", self.kubeconfig_data),
                ("tokenFile", self.token_file, "tokenData", self.token_data),
                ("caFile", self.ca_file, "caData", self.ca_data)):
            if file_value and data_value:
                yield (data_key, f"give either {file_key} or {data_key}, not both", None)
        if (self.kubeconfig or self.kubeconfig_data) and self.server:
            yield ("server", "give either a kubeconfig or server, not both", None)
        if self.server and not (self.token_file or self.token_data):
            yield ("tokenFile", "is required with server (or tokenData)",
                   "point it at the file holding the bearer token")
        if (self.token_data or self.ca_data) and not self.server:
            yield ("server", "is required with tokenData and caData",
                   "give the API server's https:// URL")

    @property
    def configured(self) -> bool:
        return bool(self.kubeconfig or self.kubeconfig_data or self.server)
