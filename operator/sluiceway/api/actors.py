"""Who makes a request, as the execution plane's audit trail names them."""

from __future__ import annotations

from fastapi import Request

from sluiceway.api.guards import identity_of
from sluiceway.api.services import services_of
from sluiceway.plane.audit import ANONYMOUS, Actor


def actor_of(request: Request) -> Actor:
    """The identity's user name, and the API key's Secret name when a key
    was used (the key itself is never kept)."""
    if not services_of(request).authenticate:
        return ANONYMOUS
    identity = identity_of(request)
    return Actor(identity.user, identity.via, identity.key)
