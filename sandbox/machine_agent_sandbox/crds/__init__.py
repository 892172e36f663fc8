"""Data only: the real Cluster API and in-cluster IPAM CRDs, as released (see NOTICE)."""
