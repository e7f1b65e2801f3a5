"""The execution plane's use cases, once, for every edge.

Starting runs, acting on them (pause, resume, retry, rerun, restart,
terminate, force a decision, send a message), a person's decision on a HUMAN
task, a verified webhook call, a schedule's fires, and dispatch (lease,
report results, hand a freed slot over, heartbeat) live here, above the
store and below the edges: the REST API (`api/`), the web UI (`ui/`), the
kopf handlers (`k8s/`), the system-task runner (`systemtasks/`) and the
loops of `runtime/`. The command line goes through the REST API.

Each command owns its connection and transaction (`units.unit`), its inline
decisions, its payload limits, its wake-ups and metrics, and its audit entry
(an `audit.Actor` says who, whichever edge it came through), and returns a
domain outcome: what it did, or the refusal that says why not. Edges map
outcomes to their own terms (status codes, pages, conditions and Events) and
never call one another."""

from sluiceway.plane.audit import Actor
from sluiceway.plane.core import Plane

__all__ = ["Actor", "Plane"]
