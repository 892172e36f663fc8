"""What the tests, the benchmarks and the sandbox share to build a world for the agent:
certificates (certs.py), bootstrap data as CABPK writes it (bootstrap.py), a node root
ready to join with its workload cluster (node.py), and a management cluster seeded with
a Machine for it (management.py). One copy of each; bench/ imports it, never tests/."""
