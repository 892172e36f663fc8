"""Data only: the real Cluster API and in-cluster IPAM CRDs, unchanged (see NOTICE)."""
