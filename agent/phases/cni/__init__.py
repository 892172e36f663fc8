"""The cni phase: Container network plugins and configuration."""

from agent.phases.cni.phase import CNIPhase

__all__ = ["CNIPhase"]
