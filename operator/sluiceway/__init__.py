"""Sluiceway: a Kubernetes operator for workflows, with every execution control
enforced on the server."""

__version__ = "0.2.0.dev0"
