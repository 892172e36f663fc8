"""A small management-cluster client on requests, and what the agent learns from it."""
