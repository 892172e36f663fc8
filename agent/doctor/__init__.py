"""`machine-agent doctor`: a read-only diagnosis of the node, every check with its fix.

The checks are the phases' own (preflight, NTP queries, the network plan, the RBAC the
agent needs), run against `Host.read_only_view()` and a management client that can only
read: a check that tried to change something would fail loudly instead. The run is
agent.doctor.registry; importing this package imports nothing (the CLI reads
agent.doctor.areas for `--phase`).
"""
