"""`spec.join`: how the node joins the workload cluster."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from agent.config import checks
from agent.config.fields import Duration, setting


@dataclass(frozen=True)
class JoinSpec:
    source: Literal["bootstrapData", "config"] = setting(
        "Join from the Machine's CABPK bootstrap data, or from this section.",
        default="bootstrapData")
    max_attempts: int = setting("kubeadm join attempts before giving up.", default=3,
                                check=checks.positive)
    timeout: Duration = setting("Time-out of one kubeadm join.", default=Duration(300),
                                check=checks.positive)
