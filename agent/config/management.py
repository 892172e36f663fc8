"""`spec.management`: how to reach the management cluster."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from agent.config import checks
from agent.config.fields import Duration, setting

Problem = tuple[str, str, str | None]


@dataclass(frozen=True)
class ManagementSpec:
    kubeconfig: str | None = setting(
        "Path of a kubeconfig for the management cluster.", default=None,
        check=checks.absolute_path)
    server: str | None = setting(
        "API server URL, used with tokenFile and caFile instead of a kubeconfig.",
        default=None, check=checks.https_url)
    token_file: str | None = setting("File holding a bearer token.", default=None,
                                     check=checks.absolute_path)
    ca_file: str | None = setting("PEM file of the CA that signed the API server's certificate.",
                                  default=None, check=checks.absolute_path)
    insecure_skip_tls_verify: bool = setting(
        "Accept any server certificate. Never in production; the agent warns loudly.",
        default=False, key="insecureSkipTLSVerify")
    request_timeout: Duration = setting("Time-out of one API request.",
                                        default=Duration(10), check=checks.positive)
    bootstrap_wait: Duration = setting(
        "How long to wait for the bootstrap data Secret (and Machine.spec.bootstrap."
        "dataSecretName) to appear.", default=Duration(600), check=checks.positive)

    def validate(self) -> Iterator[Problem]:
        if self.kubeconfig and self.server:
            yield ("server", "give either kubeconfig or server, not both", None)
        if self.server and not self.token_file:
            yield ("tokenFile", "is required with server",
                   "point it at the file holding the bearer token")

    @property
    def configured(self) -> bool:
        return bool(self.kubeconfig or self.server)
