"""IPAM: one plugin interface, plugins found by entry point and chosen by name."""
