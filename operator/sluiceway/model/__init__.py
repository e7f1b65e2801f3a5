"""Pydantic models: every resource spec and API payload. The one schema source:
the CRDs in `crds/` are generated from these models."""

GROUP = "sluiceway.dev"
# The storage version, and the one the operator watches, reads and writes.
VERSION = "v1beta1"
API_VERSION = f"{GROUP}/{VERSION}"
# Every version the API server serves, oldest first. They share one schema, so
# the API server converts between them by rewriting apiVersion alone
# (`conversion.strategy: None`): see docs/upgrades.md, "CRD versions".
SERVED_VERSIONS = ("v1alpha1", VERSION)
# Served for the objects and manifests written before v1beta1, with a warning
# on every request; removed in a later release once every cluster's storage
# has been migrated (`sluiceway crds --migrate`).
DEPRECATED_VERSIONS = frozenset({"v1alpha1"})
