"""A thin asynchronous face on the official Kubernetes client, for what the
operator does outside kopf's handlers: status mirroring, definitions written on
behalf of API callers, Events, TokenReview and SubjectAccessReview, and the
pods of CONTAINER tasks (pods.py) with an informer that watches them (informers.py)."""
