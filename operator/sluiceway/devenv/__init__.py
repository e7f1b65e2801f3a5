"""The embedded defaults for development and tests: a local Kubernetes control
plane built from source, a local PostgreSQL, and `sluiceway up`, which runs
both with the operator in the foreground."""
