"""Commands for users of a running Sluiceway: they speak to its API and to the
Kubernetes API, never to the database."""
