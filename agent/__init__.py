"""machine-agent: turns a freshly booted machine into a node of a Cluster API cluster."""

__version__ = "0.1.0"
