"""A layered drawing of a directed acyclic graph, in the manner of Sugiyama:
each node on the layer of its longest path from a source, edges that span
layers broken by invisible points, the nodes of each layer ordered by the
barycenter of their neighbours to cross fewer edges, then coordinates.

Pure and deterministic: the same graph gives the same picture, so a page
that refreshes does not shuffle its boxes."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

NODE_WIDTH = 168
NODE_HEIGHT = 44
GAP_X = 28
GAP_Y = 36
MARGIN = 16
SWEEPS = 4
POINT_LAYER_HEIGHT = 8  # the height of a layer made only of bend points


@dataclass(frozen=True)
class Placed:
    """A node's box: top-left corner and size, in SVG user units."""

    key: str
    layer: int
    x: float
    y: float
    width: float = NODE_WIDTH
    height: float = NODE_HEIGHT

    @property
    def center_x(self) -> float:
        return self.x + self.width / 2


@dataclass(frozen=True)
class Route:
    """An edge as a polyline from the bottom of `source` to the top of `target`."""

    source: str
    target: str
    points: tuple[tuple[float, float], ...]

    def path(self) -> str:
        """An SVG path: straight between layers, through the bend points."""
        head, *rest = self.points
        return f"M{head[0]:.1f},{head[1]:.1f} " + " ".join(f"L{x:.1f},{y:.1f}" for x, y in rest)


@dataclass(frozen=True)
class Drawing:
    nodes: dict[str, Placed]
    routes: list[Route]
    width: float
    height: float
    layers: list[list[str]] = field(default_factory=list)


def layers_of(keys: Sequence[str], edges: Sequence[tuple[str, str]]) -> dict[str, int]:
    """Each node's layer: the length of the longest path reaching it. Edges
    naming unknown nodes, and edges closing a cycle, are ignored."""
    known = set(keys)
    incoming: dict[str, list[str]] = {k: [] for k in keys}
    outgoing: dict[str, list[str]] = {k: [] for k in keys}
    for source, target in edges:
        if source in known and target in known and source != target:
            outgoing[source].append(target)
            incoming[target].append(source)
    layer: dict[str, int] = {}
    pending = {k: len(incoming[k]) for k in keys}
    ready = [k for k in keys if pending[k] == 0]
    while ready:
        key = ready.pop(0)
        layer[key] = max((layer[p] + 1 for p in incoming[key] if p in layer), default=0)
        for target in outgoing[key]:
            pending[target] -= 1
            if pending[target] == 0:
                ready.append(target)
    deepest = max(layer.values(), default=-1)
    for key in keys:  # on a cycle: drawn below the rest rather than lost
        layer.setdefault(key, deepest + 1)
    return layer


def _barycenter(key: str, neighbours: dict[str, list[str]], position: dict[str, int]) -> float:
    found = [position[n] for n in neighbours.get(key, ()) if n in position]
    return sum(found) / len(found) if found else float(position[key])


def _order(rows: list[list[str]], up: dict[str, list[str]], down: dict[str, list[str]]) -> list[list[str]]:
    """Sweep down then up, each layer sorted by the mean position of its
    neighbours in the layer before; ties keep declaration order (stable)."""
    position = {key: i for row in rows for i, key in enumerate(row)}
    for sweep in range(SWEEPS):
        downward = sweep % 2 == 0
        sequence = range(1, len(rows)) if downward else range(len(rows) - 2, -1, -1)
        neighbours = up if downward else down
        for index in sequence:
            rows[index] = sorted(rows[index], key=lambda k: _barycenter(k, neighbours, position))
            position.update({key: i for i, key in enumerate(rows[index])})
    return rows


def lay_out(
    keys: Sequence[str],
    edges: Sequence[tuple[str, str]],
    sizes: dict[str, tuple[float, float]] | None = None,
) -> Drawing:
    """Boxes and edge routes for the graph, top to bottom. `sizes` widens
    some nodes (a fan-out group); the rest are NODE_WIDTH by NODE_HEIGHT."""
    sizes = sizes or {}
    layer = layers_of(keys, edges)
    chains: list[tuple[str, str, list[str]]] = []  # real edge and the points it passes
    up: dict[str, list[str]] = {}
    down: dict[str, list[str]] = {}
    rows: list[list[str]] = [[] for _ in range(max(layer.values(), default=-1) + 1)]
    for key in keys:
        rows[layer[key]].append(key)
    for source, target in edges:
        if source not in layer or target not in layer or layer[target] <= layer[source]:
            continue
        path = [source]
        for between in range(layer[source] + 1, layer[target]):
            point = f"\x00{source}\x00{target}\x00{between}"  # a name no task can have
            rows[between].append(point)
            layer[point] = between
            path.append(point)
        path.append(target)
        for a, b in zip(path, path[1:], strict=False):
            down.setdefault(a, []).append(b)
            up.setdefault(b, []).append(a)
        chains.append((source, target, path[1:-1]))
    rows = _order(rows, up, down)
    placed: dict[str, Placed] = {}
    widest = 0.0
    y = float(MARGIN)
    for index, row in enumerate(rows):
        x = float(MARGIN)
        height = max((sizes.get(k, (NODE_WIDTH, NODE_HEIGHT))[1] for k in row if not k.startswith("\x00")), default=0)
        for key in row:
            width, tall = (0.0, 0.0) if key.startswith("\x00") else sizes.get(key, (NODE_WIDTH, NODE_HEIGHT))
            placed[key] = Placed(key, index, x, y, width, tall)
            x += (width or NODE_WIDTH / 4) + GAP_X
        widest = max(widest, x - GAP_X + MARGIN)
        y += (height or POINT_LAYER_HEIGHT) + GAP_Y
    routes = []
    for source, target, points in chains:
        top, bottom = placed[source], placed[target]
        bends = tuple((placed[p].x, placed[p].y + POINT_LAYER_HEIGHT / 2) for p in points)
        routes.append(Route(source, target, ((top.center_x, top.y + top.height), *bends, (bottom.center_x, bottom.y))))
    nodes = {k: v for k, v in placed.items() if not k.startswith("\x00")}
    real_rows = [[k for k in row if not k.startswith("\x00")] for row in rows]
    return Drawing(nodes, routes, max(widest, NODE_WIDTH + 2 * MARGIN), y - GAP_Y + MARGIN, real_rows)
