"""The layered layout: layers by longest path, fewer crossings by barycenter,
boxes that never overlap, and edges that run downwards."""

from __future__ import annotations

import itertools

from sluiceway.ui.layout import NODE_HEIGHT, NODE_WIDTH, Drawing, lay_out, layers_of


def test_a_node_sits_below_its_deepest_predecessor() -> None:
    layer = layers_of(["a", "b", "c", "d"], [("a", "b"), ("b", "c"), ("a", "c"), ("c", "d")])
    assert layer == {"a": 0, "b": 1, "c": 2, "d": 3}


def test_a_cycle_or_an_unknown_node_loses_no_node() -> None:
    layer = layers_of(["a", "b", "c"], [("a", "b"), ("b", "c"), ("c", "b"), ("a", "zz")])
    assert set(layer) == {"a", "b", "c"}
    assert layer["a"] == 0


def _overlaps(drawing: Drawing) -> list[tuple[str, str]]:
    found = []
    for a, b in itertools.combinations(drawing.nodes.values(), 2):
        if a.x < b.x + b.width and b.x < a.x + a.width and a.y < b.y + b.height and b.y < a.y + a.height:
            found.append((a.key, b.key))
    return found


def test_a_fork_puts_its_branches_side_by_side_and_joins_below() -> None:
    keys = ["fork", "x1", "x2", "y1", "join", "end"]
    edges = [("fork", "x1"), ("x1", "x2"), ("fork", "y1"), ("x2", "join"), ("y1", "join"), ("join", "end")]
    drawing = lay_out(keys, edges)
    n = drawing.nodes
    assert n["x1"].y == n["y1"].y > n["fork"].y
    assert n["join"].y > n["x2"].y > n["x1"].y
    assert not _overlaps(drawing)
    assert all(node.width == NODE_WIDTH and node.height == NODE_HEIGHT for node in n.values())
    # y1 -> join spans two layers: it bends through a point in the layer between
    long = next(r for r in drawing.routes if r.source == "y1")
    assert len(long.points) == 3
    for route in drawing.routes:
        ys = [y for _, y in route.points]
        assert ys == sorted(ys), "edges run downwards"
    assert drawing.width >= max(p.x + p.width for p in n.values())
    assert drawing.height >= max(p.y + p.height for p in n.values())


def test_barycenter_ordering_uncrosses_two_parallel_chains() -> None:
    # Declared so that the second layer starts crossed: a->d, b->c.
    keys = ["a", "b", "c", "d"]
    drawing = lay_out(keys, [("a", "d"), ("b", "c")])
    n = drawing.nodes
    assert (n["a"].x < n["b"].x) == (n["d"].x < n["c"].x)


def test_the_same_graph_gives_the_same_picture() -> None:
    keys = [f"t{i}" for i in range(30)]
    edges = [(f"t{i}", f"t{j}") for i in range(30) for j in (2 * i + 1, 2 * i + 2) if j < 30]
    assert lay_out(keys, edges) == lay_out(keys, edges)


def test_a_wider_node_pushes_its_neighbours_along() -> None:
    drawing = lay_out(["root", "g", "h"], [("root", "g"), ("root", "h")], {"g": (300.0, 60.0)})
    g, h = drawing.nodes["g"], drawing.nodes["h"]
    assert g.width == 300.0 and g.height == 60.0
    assert not _overlaps(drawing)
    assert h.x >= g.x + 300 or g.x >= h.x + h.width
