"""The join phase: kubeadm join of the workload cluster.

Exported for the doctor's management area: the bootstrap token's checks."""

from agent.phases.join.phase import JoinPhase
from agent.phases.join.token import token_checks

__all__ = ["JoinPhase", "token_checks"]
