"""A run's graph: the workflow's tasks as declared, each coloured by the
status of its latest attempt, and the branches of a fan-out, which can be
thousands, folded into one group node with counts when there are many.

Pure: the definition and the task rows go in, nodes and edges come out, and
`ui.layout` places them."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from sluiceway.model.workflow import TaskType, WorkflowTask, iter_tasks
from sluiceway.ui.layout import NODE_HEIGHT, NODE_WIDTH, Drawing, lay_out
from sluiceway.ui.statuses import NOT_STARTED, SEVERITY, shown, worst

# More branches than this and a fan-out is drawn as one group node.
GROUP_OVER = 12
GROUP_WIDTH = NODE_WIDTH * 1.6
_SPAWNED = re.compile(r"^(?P<base>.+)__(?P<index>[0-9]+)$")


@dataclass(frozen=True)
class Latest:
    """The latest attempt of one task reference."""

    ref: str
    type: str
    name: str
    status: str
    attempt: int


@dataclass(frozen=True)
class Node:
    key: str
    label: str
    type: str
    name: str
    status: str
    counts: dict[str, int] = field(default_factory=dict)  # a group's members by status
    parent: str | None = None  # a group's (or a branch's) fan-out task

    @property
    def is_group(self) -> bool:
        return self.type == "GROUP"

    @property
    def members(self) -> int:
        return sum(self.counts.values())

    def summary(self) -> str:
        """`×3,000: 2,950 done · 12 failed · 38 running` for a group."""
        parts = [f"{n:,} {shown(status).label}" for status, n in sorted(self.counts.items(), key=_by_severity)]
        return f"×{self.members:,}: " + " · ".join(parts)


def _by_severity(item: tuple[str, int]) -> tuple[int, str]:
    return (SEVERITY.index(item[0]) if item[0] in SEVERITY else len(SEVERITY), item[0])


@dataclass(frozen=True)
class RunGraph:
    nodes: dict[str, Node]
    edges: list[tuple[str, str]]
    drawing: Drawing


def group_key(base: str) -> str:
    return f"{base}__*"


def spawned_base(ref: str) -> str | None:
    """The task whose fan-out (or loop) made this reference: `fan__17` -> `fan`."""
    found = _SPAWNED.match(ref)
    return found.group("base") if found else None


def _wire(tasks: Sequence[WorkflowTask], edges: list[tuple[str, str]], spawned: dict[str, list[str]]) -> list[str]:
    """Edges for a sequence of tasks; returns the references it ends with (its tails)."""
    tails: list[str] = []
    for task in tasks:
        heads, ends = _wire_task(task, edges, spawned)
        edges.extend((tail, head) for tail in tails for head in heads)
        tails = ends
    return tails


def _first_refs(tasks: Sequence[WorkflowTask]) -> list[str]:
    return [tasks[0].task_reference_name] if tasks else []


def _wire_task(
    task: WorkflowTask, edges: list[tuple[str, str]], spawned: dict[str, list[str]]
) -> tuple[list[str], list[str]]:
    ref = task.task_reference_name
    tails: list[str] = []
    branches = task.children()
    for branch in branches:
        edges.extend((ref, head) for head in _first_refs(branch))
        tails.extend(_wire(branch, edges, spawned) or [ref])
    if task.type is TaskType.SWITCH and task.default_case is None:
        tails.append(ref)  # no case matched: straight on
    children = spawned.get(ref, [])
    edges.extend((ref, child) for child in children)
    if children and task.type is TaskType.FORK_JOIN_DYNAMIC:
        tails = [*tails, *children]
    return [ref], sorted(set(tails), key=tails.index) or [ref]


def build(
    spec_tasks: Sequence[WorkflowTask] | None,
    latest: Mapping[str, Latest],
    *,
    group_over: int = GROUP_OVER,
    expanded: frozenset[str] = frozenset(),
) -> RunGraph:
    """The graph of a run whose definition declares `spec_tasks` (None when
    it no longer parses: the tasks that ran, unconnected) and whose task
    references' latest attempts are `latest`. A fan-out of more than
    `group_over` branches is one node, unless its base is in `expanded`."""
    declared = iter_tasks(list(spec_tasks or []))
    known = {t.task_reference_name for t in declared}
    by_base: dict[str, list[str]] = {}
    loose: list[str] = []
    for ref in latest:
        if ref in known:
            continue
        base = spawned_base(ref)
        if base in known:
            by_base.setdefault(base, []).append(ref)
        else:
            loose.append(ref)
    nodes: dict[str, Node] = {}
    for task in declared:
        ref = task.task_reference_name
        found = latest.get(ref)
        nodes[ref] = Node(ref, ref, task.type.value, task.name, found.status if found else NOT_STARTED)
    spawned: dict[str, list[str]] = {}
    for base, refs in by_base.items():
        refs.sort(key=lambda r: int(r.rsplit("__", 1)[1]))
        if len(refs) > group_over and base not in expanded:
            counts = dict(Counter(latest[r].status for r in refs))
            key = group_key(base)
            nodes[key] = Node(key, f"{base} branches", "GROUP", latest[refs[0]].name, worst(counts), counts, base)
            spawned[base] = [key]
        else:
            for ref in refs:
                row = latest[ref]
                nodes[ref] = Node(ref, ref, row.type, row.name, row.status, parent=base)
            spawned[base] = refs
    for ref in loose:
        row = latest[ref]
        nodes[ref] = Node(ref, ref, row.type, row.name, row.status)
    edges: list[tuple[str, str]] = []
    _wire(list(spec_tasks or []), edges, spawned)
    sizes = {k: (GROUP_WIDTH, NODE_HEIGHT * 1.4) for k, n in nodes.items() if n.is_group}
    return RunGraph(nodes, edges, lay_out(list(nodes), edges, sizes))
