"""The report's caveats as a reader sees them: every skipped section, interval replaced by a note
and section warning, named in words ("LET-3D-AP, Waymo mean, gap") instead of JSON keys, and a
note repeated across one section's intervals said once with how many more share it.
"""

from __future__ import annotations

from typing import Any

SECTIONS = {"detection": "LET", "lanes": "lanes", "video": "video", "sampson": "Sampson", "clips": "clips", "rnds": "RNDS",
            "instants": "instants", "ground_truth": "ground truth"}  # fmt: skip
WORDS = {
    "ap": "LET-3D-AP", "apl": "LET-3D-APL", "aph": "LET-3D-APH", "waymo_mean": "Waymo mean (vehicle, pedestrian, cyclist)",
    "mean_over_classes_with_gt": "mean over classes with ground truth", "unbiased_n_minus_1": "covariance N-1",
    "biased_n": "covariance /N", "fid": "FID", "fvd": "FVD", "tse": "TSE", "cse": "CSE", "f_score": "F-score",
    "mean_of_video_medians": "mean of per-video medians", "mean_over_chunks_2_to_C": "mean over chunks 2..C",
    "category_accuracy": "category accuracy", "x_error_near_m": "x error near (m)", "x_error_far_m": "x error far (m)",
    "z_error_near_m": "z error near (m)", "z_error_far_m": "z error far (m)",
}  # fmt: skip
SKIP_KEYS = ("warnings", "provenance", "inputs", "settings", "per_view", "per_video", "rigs")


def place_name(where: str) -> str:
    """A report path in words: "detection/intervals/waymo_mean/ap/gap" -> "LET-3D-AP, Waymo mean (...), gap".

    Args:
        where: the path of a node in the report ("/"-joined keys).

    Returns:
        The words (the section alone for a section).
    """
    parts = [p for p in where.split("/") if p and p != "intervals"]
    if not parts:
        return ""
    section, rest = SECTIONS.get(parts[0], parts[0]), parts[1:]
    if parts[0] == "detection" and len(rest) >= 2 and rest[-2] in ("ap", "apl", "aph"):  # <class>[/range R]/<metric>/<side>
        words = [WORDS[rest[-2]], *(f"{p} m" if p.startswith("range ") else WORDS.get(p, p) for p in rest[:-2]), rest[-1]]
        return ", ".join(words)
    return ", ".join([section, *(WORDS.get(p, p) for p in rest)])


def _walk(node: Any, where: str) -> list[tuple[str, str]]:
    """(place, message) of every caveat under `node`, in report order."""
    if not isinstance(node, dict):
        return []
    out: list[tuple[str, str]] = []
    if isinstance(node.get("skipped"), str):
        out.append((where, f"skipped: {node['skipped']}"))
    for key in ("note", "band_note"):
        if node.get(key):
            out.append((where, f"{'interval' if key == 'note' else 'band'} {node[key]}"))
    out += [(where, w) for w in node.get("warnings", []) if isinstance(w, str)]
    for key, value in node.items():
        if key not in SKIP_KEYS:
            out += _walk(value, f"{where}/{key}" if where else str(key))
    return out


def collect_warnings(node: Any, where: str = "") -> list[str]:
    """Every caveat in a report (or a section of one): skipped sections with their reason,
    intervals and bands replaced by a note, and the sections' own warnings, each prefixed by
    where it was found in words (e.g. "FID, covariance N-1: interval n/a (1 clip)"); a note that
    several intervals of one section share is given once, with "(and N more in <section>)".

    Args:
        node: the report dict (or any part of it).
        where: the path of `node` in the report.

    Returns:
        the warning lines, in report order.
    """
    found = _walk(node, where)
    seen: dict[tuple[str, str], int] = {}
    first: list[tuple[str, str]] = []
    for place, message in found:
        section = place.split("/", 1)[0]
        key = (section, message)
        if message.startswith(("interval ", "band ")) and key in seen:
            seen[key] += 1
            continue
        seen[key] = 0
        first.append((place, message))
    lines = []
    for place, message in first:
        more = seen.get((place.split("/", 1)[0], message), 0)
        name = place_name(place)
        tail = f" (and {more} more in {SECTIONS.get(place.split('/', 1)[0], place)})" if more else ""
        lines.append(f"{name}: {message}{tail}" if name else f"{message}{tail}")
    return lines
