"""Which OpenDRIVE roads an avsim lane graph becomes: one single-lane road per lane piece, junctions
where lanes split or merge.

A *node* is where lanes meet: the end of a lane and the starts of its successors (joined
transitively). A node with one lane in and one out is a plain road link. Any other node is part
of a junction; lanes whose both ends are junction nodes (the turning lanes of an intersection)
are *interior*: they and the nodes they join form one junction. Every other lane that ends (starts)
at a junction node gives up its last (first) `CUT_M` metres (at most 40 % of its length). Each
path through a junction -- a cut end, any interior lanes, a cut start -- is one connecting road
(paths share geometry; OpenDRIVE junctions overlap their connecting roads so).

Where consecutive pieces of a path, or two linked lanes, do not meet exactly (a lane graph built
from geometry, or rails that disagree at a node), the later piece is bent to meet the earlier one:
its rails are moved by the gap at its start, the move falling linearly to zero over
`BLEND_M` metres (at most half the piece). The plan records the largest move.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from avsim.core.typing import NDArrayFloat

CUT_M = 3.0
BLEND_M = 5.0
MAX_PATHS = 20_000


@dataclass
class Piece:
    """One road to write: its rails, the source lanes it holds (names, in order), its junction
    ("-1": none), and links (index of the predecessor / successor piece, None: none)."""

    name: str
    left: NDArrayFloat
    right: NDArrayFloat
    junction: str = "-1"
    predecessor: int | None = None
    successor: int | None = None
    pred_junction: str | None = None
    succ_junction: str | None = None


@dataclass
class Plan:
    """The pieces, the junctions (id -> connections (incoming piece, connecting piece)), and facts."""

    pieces: list[Piece] = field(default_factory=list)
    junctions: dict[str, list[tuple[int, int]]] = field(default_factory=dict)
    max_move_m: float = 0.0
    skipped: dict[str, int] = field(default_factory=dict)


class _Ports:
    """Union-find over lane ends ('e', k) and starts ('s', k)."""

    def __init__(self) -> None:
        self.parent: dict[tuple[str, int], tuple[str, int]] = {}

    def find(self, x: tuple[str, int]) -> tuple[str, int]:
        self.parent.setdefault(x, x)
        while self.parent[x] != x:
            self.parent[x] = self.parent[self.parent[x]]
            x = self.parent[x]
        return x

    def union(self, a: tuple[str, int], b: tuple[str, int]) -> None:
        self.parent[self.find(a)] = self.find(b)


def _arc(p: NDArrayFloat) -> NDArrayFloat:
    return np.r_[0.0, np.cumsum(np.linalg.norm(np.diff(p[:, :2], axis=0), axis=1))]


def cut(p: NDArrayFloat, a: float, b: float) -> NDArrayFloat:
    """The polyline between fractions a < b of its length."""
    s = _arc(p)
    lo, hi = a * s[-1], b * s[-1]
    keep = (s > lo + 1e-9) & (s < hi - 1e-9)
    ends = np.stack([np.interp([lo, hi], s, p[:, i]) for i in range(3)], 1)
    return np.concatenate([ends[:1], p[keep], ends[1:]])


def blend_start(p: NDArrayFloat, target: NDArrayFloat) -> tuple[NDArrayFloat, float]:
    """`p` bent so that it starts at `target` (see the module docstring); the move's size."""
    move = target - p[0]
    size = float(np.linalg.norm(move))
    if size == 0.0:
        return p, 0.0
    s = _arc(p)
    span = min(BLEND_M, s[-1] / 2) if s[-1] > 0 else 1.0
    w = np.clip(1.0 - s / max(span, 1e-9), 0.0, 1.0)
    return p + w[:, None] * move[None, :], size


def _join(a: NDArrayFloat, b: NDArrayFloat) -> NDArrayFloat:
    return np.concatenate([a, b[1:]]) if np.linalg.norm(a[-1] - b[0]) < 1e-9 else np.concatenate([a, b])


@dataclass
class _Graph:
    """The lane graph's nodes: node of each lane start / end, and which nodes are junction nodes."""

    start: list[tuple[str, int]]
    end: list[tuple[str, int]]
    complex_nodes: set[tuple[str, int]]
    succ: list[list[int]]
    pred: list[list[int]]


def _graph(n: int, succ: list[list[int]]) -> _Graph:
    ports = _Ports()
    pred: list[list[int]] = [[] for _ in range(n)]
    for a, bs in enumerate(succ):
        for b in bs:
            ports.union(("e", a), ("s", b))
            pred[b].append(a)
    start = [ports.find(("s", k)) for k in range(n)]
    end = [ports.find(("e", k)) for k in range(n)]
    ins: dict[tuple[str, int], int] = {}
    outs: dict[tuple[str, int], int] = {}
    for k in range(n):
        if succ[k]:
            ins[end[k]] = ins.get(end[k], 0) + 1
        if pred[k]:
            outs[start[k]] = outs.get(start[k], 0) + 1
    complex_nodes = {node for node in set(ins) | set(outs) if (ins.get(node, 0), outs.get(node, 0)) != (1, 1)}
    return _Graph(start, end, complex_nodes, succ, pred)


def _junction_ids(g: _Graph, interior: list[bool]) -> dict[tuple[str, int], str]:
    """Junction id of every junction node: nodes joined by interior lanes share one."""
    ports = _Ports()
    nodes = sorted(g.complex_nodes)
    index = {node: k for k, node in enumerate(nodes)}
    for k, inner in enumerate(interior):
        if inner:
            ports.union(("n", index[g.start[k]]), ("n", index[g.end[k]]))
    roots = sorted({ports.find(("n", k)) for k in range(len(nodes))})
    names = {root: str(1000 + j) for j, root in enumerate(roots)}
    return {node: names[ports.find(("n", k))] for node, k in index.items()}


def _split(k: int, left: NDArrayFloat, right: NDArrayFloat, cut_start: bool, cut_end: bool) -> dict[str, tuple[NDArrayFloat, NDArrayFloat]]:
    length = float(_arc(left)[-1])
    frac = min(CUT_M, 0.4 * length) / length if length > 0 else 0.0
    a = frac if cut_start else 0.0
    b = 1.0 - frac if cut_end else 1.0
    out = {"rest": (cut(left, a, b), cut(right, a, b))}
    if cut_start:
        out["start"] = (cut(left, 0.0, a), cut(right, 0.0, a))
    if cut_end:
        out["end"] = (cut(left, b, 1.0), cut(right, b, 1.0))
    return out


def _paths(g: _Graph, interior: list[bool], a: int) -> list[list[int]]:
    """Lane sequences from entry lane a through interior lanes to a lane that leaves the junction."""
    out: list[list[int]] = []
    stack = [[a]]
    while stack and len(out) < MAX_PATHS:
        path = stack.pop()
        for nxt in sorted(g.succ[path[-1]], reverse=True):
            if nxt in path:
                continue
            if interior[nxt]:
                stack.append([*path, nxt])
            else:
                out.append([*path, nxt])
    return sorted(out)


def _path_piece(names: list[str], parts: list[dict[str, tuple[NDArrayFloat, NDArrayFloat]]], lanes: list[tuple[NDArrayFloat, NDArrayFloat]],
                path: list[int]) -> tuple[Piece, float]:  # fmt: skip
    segs = [parts[path[0]]["end"]] + [lanes[k] for k in path[1:-1]] + [parts[path[-1]]["start"]]
    left, right = segs[0]
    moved = 0.0
    for seg_left, seg_right in segs[1:]:
        bl, m1 = blend_start(seg_left, left[-1])
        br, m2 = blend_start(seg_right, right[-1])
        left, right, moved = _join(left, bl), _join(right, br), max(moved, m1, m2)
    label = ">".join([f"{names[path[0]]}#end", *(names[k] for k in path[1:-1]), f"{names[path[-1]]}#start"])
    return Piece(label, left, right), moved


def plan_roads(names: list[str], lanes: list[tuple[NDArrayFloat, NDArrayFloat]], succ: list[list[int]]) -> Plan:
    """The roads and junctions of a lane graph (see the module docstring).

    Args:
        names: (K,) lane ids.
        lanes: K (left rail, right rail) pairs, in the driving direction, each >= 2 points.
        succ: K successor lists (lane indices).

    Returns:
        The plan.
    """
    n = len(names)
    g = _graph(n, succ)
    plan = Plan()
    lanes = [(left.copy(), right.copy()) for left, right in lanes]
    for a in range(n):  # plain links: the successor starts where its predecessor ends
        if len(succ[a]) == 1 and g.end[a] not in g.complex_nodes:
            b = succ[a][0]
            (la, ra), (lb, rb) = lanes[a], lanes[b]
            lb, m1 = blend_start(lb, la[-1])
            rb, m2 = blend_start(rb, ra[-1])
            lanes[b] = (lb, rb)
            plan.max_move_m = max(plan.max_move_m, m1, m2)
    interior = [g.start[k] in g.complex_nodes and g.end[k] in g.complex_nodes and bool(succ[k]) and bool(g.pred[k]) for k in range(n)]
    jid = _junction_ids(g, interior)
    parts: list[dict[str, tuple[NDArrayFloat, NDArrayFloat]]] = [{} for _ in range(n)]
    rest: dict[int, int] = {}
    for k in range(n):
        if interior[k]:
            continue
        cut_start = bool(g.pred[k]) and g.start[k] in g.complex_nodes
        cut_end = bool(succ[k]) and g.end[k] in g.complex_nodes
        parts[k] = _split(k, *lanes[k], cut_start, cut_end)
        rest[k] = len(plan.pieces)
        piece = Piece(names[k], *parts[k]["rest"])
        piece.pred_junction = jid[g.start[k]] if cut_start else None
        piece.succ_junction = jid[g.end[k]] if cut_end else None
        plan.pieces.append(piece)
    for a in range(n):
        if interior[a] or a not in rest:
            continue
        if len(succ[a]) == 1 and g.end[a] not in g.complex_nodes and succ[a][0] in rest:
            plan.pieces[rest[a]].successor = rest[succ[a][0]]
            plan.pieces[rest[succ[a][0]]].predecessor = rest[a]
        elif "end" in parts[a]:
            for path in _paths(g, interior, a):
                piece, moved = _path_piece(names, parts, lanes, path)
                piece.junction = jid[g.end[a]]
                piece.predecessor, piece.successor = rest[a], rest[path[-1]]
                plan.max_move_m = max(plan.max_move_m, moved)
                plan.junctions.setdefault(piece.junction, []).append((rest[a], len(plan.pieces)))
                plan.pieces.append(piece)
    return plan
