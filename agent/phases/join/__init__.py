"""The join phase: kubeadm join of the workload cluster."""

from agent.phases.join.phase import JoinPhase

__all__ = ["JoinPhase"]
