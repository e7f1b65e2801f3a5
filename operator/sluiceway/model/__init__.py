"""Pydantic models: every resource spec and API payload. The one schema source:
the CRDs in `crds/` are generated from these models."""

GROUP = "sluiceway.dev"
VERSION = "v1alpha1"
API_VERSION = f"{GROUP}/{VERSION}"
