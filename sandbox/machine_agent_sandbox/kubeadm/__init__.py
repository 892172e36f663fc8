"""The kubeadm stand-in's parts: one module per kubeadm command or phase it follows
(config, join_preflight, cluster_info, kubelet_start, control_plane, join, init, reset_command)
and per detail of kubeadm's behaviour (errors, flags, hostname, ...);
machine_agent_sandbox.kubeadm_standin is the program that runs them."""
