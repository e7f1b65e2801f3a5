"""What a route asks of RBAC: the verb it needs on a `sluiceway.dev` resource,
and where the names of the resources it touches come from.

Pure: a rule turns a namespace and names into the SubjectAccessReview
questions (`Check`s) to ask. Routes declare their rule where they are declared
(`sluiceway.api.guards.requires`); the authenticator answers the checks."""

from __future__ import annotations

import enum
from collections.abc import Iterable
from dataclasses import dataclass

from sluiceway.model import GROUP


class Names(enum.Enum):
    """Where a route's checks take resource names from."""

    NONE = "none"  # one check, no name: a namespace-wide right
    PATH = "path"  # the `{name}` path parameter
    REQUEST = "request"  # what the request names: the task types polled, or those of the tasks reported


@dataclass(frozen=True)
class Check:
    """One SubjectAccessReview's question: verb on group/resource[/name] in namespace."""

    verb: str
    resource: str
    namespace: str
    name: str | None = None
    group: str = GROUP

    def refusal(self, user: str) -> str:
        target = f"{self.resource}/{self.name}" if self.name else self.resource
        return f"{user} may not {self.verb} {target} in namespace {self.namespace}"


@dataclass(frozen=True)
class Rule:
    """A route's access rule: `verb` on `resource`, about the names `names` says."""

    verb: str
    resource: str
    names: Names = Names.NONE

    def checks(self, namespace: str, names: Iterable[str] = ()) -> list[Check]:
        """The checks this rule needs in `namespace`. For rules naming
        resources, one per distinct name; none when there are no names
        (results and heartbeats for tasks that do not exist in the namespace:
        the store answers 404 for those and changes nothing)."""
        if self.names is Names.NONE:
            return [Check(self.verb, self.resource, namespace)]
        return [Check(self.verb, self.resource, namespace, name) for name in sorted(set(names))]

    def __str__(self) -> str:
        named = {Names.NONE: "", Names.PATH: "/{name}", Names.REQUEST: "/<named in the request>"}[self.names]
        return f"{self.verb} {self.resource}{named}"
