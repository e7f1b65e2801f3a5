"""Fair dispatch of the operator's shared system-task slots across
namespaces: deficit round robin, weighted by each namespace's Quota
(`dispatchWeight`, 1 by default).

The operator runs HTTP, WEBHOOK and GRPC tasks for every namespace with one
pool of slots (SLUICEWAY_HTTP_CONCURRENCY per replica). First come, a
namespace with a million queued calls would hold every slot until its
backlog drained. Instead each namespace with ready work earns its weight in
credit per round and spends one per slot; the namespace with the most credit
goes next, so over time slots are shared in proportion to the weights, and a
namespace that arrives with 100 tasks waits about as long as it would on an
idle operator (divided by the number of busy namespaces). Credit a namespace
could not use (it had fewer ready tasks than slots) is handed back, and a
namespace with no ready work forgets its credit (no hoarding while idle), as
in Shreedhar and Varghese's DRR. Pure: the caller leases."""

from __future__ import annotations

from collections.abc import Mapping


class DeficitRoundRobin:
    def __init__(self) -> None:
        self.deficits: dict[str, float] = {}

    def allocate(self, free: int, weights: Mapping[str, float]) -> dict[str, int]:
        """Share `free` slots among the namespaces with ready work (their
        weights, each > 0); the slots of each, possibly 0."""
        for gone in set(self.deficits) - set(weights):
            del self.deficits[gone]
        shares = dict.fromkeys(weights, 0)
        if not weights:
            return shares
        heaviest = max(weights.values())
        while free > 0:
            name = max(weights, key=lambda n: (self.deficits.get(n, 0.0), weights[n], n))
            if self.deficits.get(name, 0.0) < 1:  # a new round: every waiting namespace earns its weight
                for each, weight in weights.items():
                    self.deficits[each] = self.deficits.get(each, 0.0) + weight / heaviest
                continue
            self.deficits[name] -= 1
            shares[name] += 1
            free -= 1
        return shares

    def refund(self, name: str, unused: int) -> None:
        """Slots a namespace was given but could not fill: its credit back."""
        if unused > 0 and name in self.deficits:
            self.deficits[name] += unused
