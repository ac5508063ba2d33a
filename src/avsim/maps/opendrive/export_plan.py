"""Which OpenDRIVE roads an avsim lane graph becomes: one single-lane road per lane piece, junctions
where lanes split or merge.

A *node* is where lanes meet: the end of a lane and the starts of its successors (joined
transitively). A node with one lane in and one out is a plain road link. Any other node is part
of a junction; lanes whose both ends are junction nodes (the turning lanes of an intersection)
are *interior*: they and the nodes they join form one junction. Every other lane that ends (starts)
at a junction node gives up its last (first) `CUT_M` metres (at most 40 % of its length), cut at a
perpendicular cross-section (`export_sections`). Each path through a junction -- a cut end, any
interior lanes, a cut start -- is one connecting road (paths share geometry; OpenDRIVE junctions
overlap their connecting roads so).

Lanes joined by plain links form *chains*, cut into roads at perpendicular cross-sections so that
linked roads meet exactly: where a link is slanted (the lanes' rails meet at points more than
`SLANT_M` apart along the lane), the stretch between those points is one road holding both lanes
(``a>b``); a chain end with no link is lengthened to the rail that reaches farther. Where
consecutive lanes do not meet (a lane graph built from geometry), nothing is moved: the rails are
joined as they are and the gap is bridged inside one road. The plan records the largest gap.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from avsim.core.typing import NDArrayFloat
from avsim.maps.opendrive.export_sections import arc, between, extend, stations

CUT_M = 3.0
SLANT_M = 0.01
MIN_TRANSITION_M = 0.5
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
    transition: bool = False  # the stretch where two plainly linked lanes meet on a slant


@dataclass
class Plan:
    """The pieces, the junctions (id -> connections (incoming piece, connecting piece)), and facts
    (`max_move_m`: the largest gap between linked lanes bridged inside a road)."""

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


def _split(left: NDArrayFloat, right: NDArrayFloat, cut_start: bool, cut_end: bool) -> dict[str, tuple[NDArrayFloat, NDArrayFloat]]:
    """A lane's rest and the stretches it gives up to junctions, cut at perpendicular cross-sections
    `CUT_M` (at most 40 %) from its ends."""
    length = float(arc(left)[-1])
    step = min(CUT_M, 0.4 * length)
    a = step if cut_start else None
    b = length - step if cut_end else None
    if a is None and b is None:
        return {"rest": (left, right)}
    out = {"rest": between(left, right, a, b)}
    if cut_start:
        out["start"] = between(left, right, None, a)
    if cut_end:
        out["end"] = between(left, right, b, None)
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
        moved = max(moved, float(np.linalg.norm(seg_left[0] - left[-1])), float(np.linalg.norm(seg_right[0] - right[-1])))
        left, right = _join(left, seg_left), _join(right, seg_right)
    label = ">".join([f"{names[path[0]]}#end", *(names[k] for k in path[1:-1]), f"{names[path[-1]]}#start"])
    return Piece(label, left, right), moved


def _chains(order: list[int], nxt: dict[int, int]) -> list[tuple[list[int], bool]]:
    """Maximal runs of lanes joined by plain links (heads first, then loops: closed=True)."""
    heads = [k for k in order if k not in set(nxt.values())]
    seen: set[int] = set()
    out: list[tuple[list[int], bool]] = []
    for k in heads + order:
        if k in seen:
            continue
        chain = [k]
        seen.add(k)
        while nxt.get(chain[-1]) is not None and nxt[chain[-1]] not in seen:
            chain.append(nxt[chain[-1]])
            seen.add(chain[-1])
        out.append((chain, nxt.get(chain[-1]) == chain[0]))
    return out


def _intervals(left: NDArrayFloat, rails: list[tuple[NDArrayFloat, NDArrayFloat]]) -> list[tuple[float, float, int, int]]:
    """The slanted nodes of a chain as station intervals (lo, hi, first node, last node), padded to
    `MIN_TRANSITION_M` and merged where they overlap or leave less than that between them."""
    length = float(arc(left)[-1])
    out: list[tuple[float, float, int, int]] = []
    for i in range(len(rails) - 1):
        (la, ra), (lb, rb) = rails[i], rails[i + 1]
        s = stations(left, np.stack([la[-1], lb[0], ra[-1], rb[0]]))
        lo, hi = float(s.min()), float(s.max())
        if hi - lo < SLANT_M:
            continue
        pad = max(MIN_TRANSITION_M - (hi - lo), 0.0) / 2
        lo, hi = max(lo - pad, 0.0), min(hi + pad, length)
        lo = 0.0 if lo < MIN_TRANSITION_M else lo
        hi = length if length - hi < MIN_TRANSITION_M else hi
        if out and lo - out[-1][1] < MIN_TRANSITION_M:
            out[-1] = (out[-1][0], max(hi, out[-1][1]), out[-1][2], i)
        else:
            out.append((lo, hi, i, i))
    return out


def _chain_pieces(names: list[str], rails: list[tuple[NDArrayFloat, NDArrayFloat]], free_start: bool, free_end: bool) -> list[tuple[str, NDArrayFloat, NDArrayFloat]]:
    """A chain of plainly linked lanes as consecutive pieces cut at perpendicular cross-sections:
    where a link is slanted (the rails of the two lanes meet more than `SLANT_M` apart along the
    lane), the stretch between the two rails' meeting points is one piece holding both lanes
    (named ``a>b``), so that neither lane's rails fall outside its roads and linked roads meet
    exactly; a free chain end is lengthened to the rail that reaches farther (`extend`)."""
    left = rails[0][0]
    right = rails[0][1]
    for la, ra in rails[1:]:
        left, right = _join(left, la), _join(right, ra)
    left = extend(left, right, free_start, free_end)
    spans = _intervals(left, rails)
    if not spans and len(left) == sum(len(r[0]) for r in rails) - len(rails) + 1:
        return [(n, la, ra) for n, (la, ra) in zip(names, rails)]
    s_nodes = [float(x) for x in stations(left, np.stack([la[-1] for la, _ in rails[:-1]]))] if len(rails) > 1 else []
    cuts: list[tuple[float, list[int]]] = []  # (start station, lanes) of each piece
    lane, s_at = 0, 0.0
    for lo, hi, i, j in spans:
        for node in range(lane, i):
            cuts.append((s_at, [node]))
            s_at = s_nodes[node]
        if lo > s_at:
            cuts.append((s_at, [i]))
        cuts.append((lo if lo > s_at else s_at, list(range(i, j + 2))))
        lane, s_at = j + 1, hi
    for node in range(lane, len(rails) - 1):
        cuts.append((s_at, [node]))
        s_at = s_nodes[node]
    cuts.append((s_at, [len(rails) - 1]))
    bounds = [c[0] for c in cuts] + [float(arc(left)[-1])]
    out = []
    for (a, lanes), b in zip(cuts, bounds[1:]):
        if b - a > 1e-6:
            out.append((">".join(names[k] for k in lanes), *between(left, right, a, b)))
    return out


def _plain_roads(plan: Plan, names: list[str], g: _Graph, jid: dict[tuple[str, int], str], parts: list[dict[str, tuple[NDArrayFloat, NDArrayFloat]]],
                 nxt: dict[int, int], interior: list[bool]) -> tuple[dict[int, int], dict[int, int]]:  # fmt: skip
    """The roads outside junctions, chain by chain (`_chain_pieces`), appended to the plan in lane
    order; returns the plan index of each chain head's first road and each chain tail's last road."""
    n = len(names)
    records: list[tuple[tuple[int, int], Piece]] = []  # (order key, piece); links as record indices
    first: dict[int, int] = {}
    last: dict[int, int] = {}
    for chain, closed in _chains([k for k in range(n) if not interior[k]], nxt):
        head, tail = chain[0], chain[-1]
        got = _chain_pieces([names[k] for k in chain], [parts[k]["rest"] for k in chain], not g.pred[head], not g.succ[tail])
        index = {name: k for k, name in zip(chain, (names[k] for k in chain))}
        base = len(records)
        for j, (name, left, right) in enumerate(got):
            piece = Piece(name, left, right, transition=">" in name)
            if j:
                piece.predecessor = base + j - 1
                records[-1][1].successor = base + j
            records.append(((index[name.split(">")[0]], int(">" in name)), piece))
        first[head], last[tail] = base, len(records) - 1
        records[base][1].pred_junction = jid[g.start[head]] if "start" in parts[head] else None
        records[-1][1].succ_junction = jid[g.end[tail]] if "end" in parts[tail] else None
        if closed:
            records[-1][1].successor, records[base][1].predecessor = base, len(records) - 1
    order = sorted(range(len(records)), key=lambda r: records[r][0])
    new_id = {r: j for j, r in enumerate(order)}
    for r in order:
        piece = records[r][1]
        piece.predecessor = None if piece.predecessor is None else new_id[piece.predecessor]
        piece.successor = None if piece.successor is None else new_id[piece.successor]
        plan.pieces.append(piece)
    return {k: new_id[r] for k, r in first.items()}, {k: new_id[r] for k, r in last.items()}


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
    interior = [g.start[k] in g.complex_nodes and g.end[k] in g.complex_nodes and bool(succ[k]) and bool(g.pred[k]) for k in range(n)]
    jid = _junction_ids(g, interior)
    parts: list[dict[str, tuple[NDArrayFloat, NDArrayFloat]]] = [{} for _ in range(n)]
    for k in range(n):
        if not interior[k]:
            parts[k] = _split(*lanes[k], bool(g.pred[k]) and g.start[k] in g.complex_nodes, bool(succ[k]) and g.end[k] in g.complex_nodes)
    nxt = {a: succ[a][0] for a in range(n) if not interior[a] and len(succ[a]) == 1 and g.end[a] not in g.complex_nodes}
    for a, b in nxt.items():
        gaps = [np.linalg.norm(parts[a]["rest"][side][-1] - parts[b]["rest"][side][0]) for side in (0, 1)]
        plan.max_move_m = max(plan.max_move_m, *(float(x) for x in gaps))
    first, last = _plain_roads(plan, names, g, jid, parts, nxt, interior)
    for a in range(n):
        if "end" not in parts[a]:
            continue
        for path in _paths(g, interior, a):
            piece, moved = _path_piece(names, parts, lanes, path)
            piece.junction = jid[g.end[a]]
            piece.predecessor, piece.successor = last[a], first[path[-1]]
            plan.max_move_m = max(plan.max_move_m, moved)
            plan.junctions.setdefault(piece.junction, []).append((last[a], len(plan.pieces)))
            plan.pieces.append(piece)
    return plan
