"""The kubeadm stand-in's parts, one module per concern of kubeadm it follows
(machine_agent_sandbox.kubeadm_standin runs them)."""
