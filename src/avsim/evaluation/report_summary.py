"""The report page's summary: one row per headline metric with its direction, the value and
interval of each side and of the gap, the paper's published values, whether the protocol
matches, and the caveat that belongs beside the number (texts in `report_reference`).
"""

from __future__ import annotations

import html
from typing import Any

from avsim.evaluation.report_reference import NOTES, MetricNotes, cse_protocol, frechet_protocol
from avsim.evaluation.results import fmt_number


def fmt(x: Any) -> str:
    """A number for the page (`results.fmt_number`: 4 significant digits, n/a for None and non-finite, 0 below 1e-9)."""
    return html.escape(fmt_number(x))


def ci_html(d: dict[str, Any] | None) -> str:
    """`estimate [low, high]`, or the estimate with the note that replaces a degenerate interval."""
    if not d:
        return "<span class=skip>n/a</span>"
    if d.get("note"):  # too few units to resample: no interval, and the page says why
        return f"<span class=num>{fmt(d['estimate'])}</span> <span class=ci>{html.escape(d['note'])}</span>"
    return f"<span class=num>{fmt(d['estimate'])}</span> <span class=ci>[{fmt(d['ci_low'])}, {fmt(d['ci_high'])}]</span>"


def table_html(header: list[str], rows: list[list[str]]) -> str:
    """A table (header escaped, cells as given) in a horizontally scrolling box for narrow windows."""
    th = "".join(f"<th>{html.escape(h)}</th>" for h in header)
    body = "".join("<tr>" + "".join(f"<td>{c}</td>" for c in r) + "</tr>" for r in rows)
    return f"<div class=wrap><table><thead><tr>{th}</tr></thead><tbody>{body}</tbody></table></div>"


def _row(notes: MetricNotes, real: str, gen: str, gap: str, protocol: str = "", caveat: str = "") -> list[str]:
    paper = " / ".join(v for v in (notes.paper_generated and f"gen {notes.paper_generated}",
                                   notes.paper_real and f"real {notes.paper_real}") if v) or "not published"  # fmt: skip
    text = " ".join(t if t.endswith(".") else t + "." for t in (protocol or notes.protocol, caveat or notes.caveat) if t)
    return [html.escape(notes.title), f"<span class=better>{notes.better.value}</span>", real, gen, gap, html.escape(paper),
            f"<span class=proto>{html.escape(text)}</span>"]  # fmt: skip


def _detection_rows(result: dict[str, Any]) -> list[list[str]]:
    det = result.get("detection", {})
    iv = det.get("intervals")
    if not iv:
        return []
    rows = [_row(NOTES["let"], ci_html(iv["waymo_mean/ap/real"]), ci_html(iv["waymo_mean/ap/generated"]), ci_html(iv["waymo_mean/ap/gap"]))]
    apl = NOTES["let"]
    rows.append(_row(MetricNotes("LET-3D-APL (Waymo mean; the challenge's ranking metric)", apl.better), ci_html(iv["waymo_mean/apl/real"]),
                     ci_html(iv["waymo_mean/apl/generated"]), ci_html(iv["waymo_mean/apl/gap"]), "resampling unit: frame, paired"))  # fmt: skip
    return rows


def _lane_rows(result: dict[str, Any]) -> list[list[str]]:
    iv = result.get("lanes", {}).get("intervals")
    if not iv:
        return []
    return [_row(NOTES["lane_f1"], ci_html(iv["f_score/real"]), ci_html(iv["f_score/generated"]), ci_html(iv["f_score/gap"]))]


def _video_rows(result: dict[str, Any]) -> list[list[str]]:
    rows = []
    video = result.get("video", {})
    for kind in ("fid", "fvd"):
        d = video.get(kind, {})
        if "unbiased_n_minus_1" not in d:
            continue
        unit = d.get("resampling", {})
        where = f"{unit.get('clips', {}).get('real', '?')} + {unit.get('clips', {}).get('generated', '?')} clips resampled (all views together)"
        rows.append(_row(NOTES[kind], "—", ci_html(d["unbiased_n_minus_1"]) + "<br><span class=note>(generated vs real)</span>", "—",
                         f"{frechet_protocol(video, kind, result.get('clips'))}; {where}."))  # fmt: skip
    samp = result.get("sampson", {})
    for kind in ("tse", "cse"):
        r, g = samp.get(f"{kind}/real", {}), samp.get(f"{kind}/generated", {})
        if "mean_of_video_medians" not in r and "mean_of_video_medians" not in g:
            continue
        proto = cse_protocol(samp) if kind == "cse" else "unit: clip (all its views together)"
        rows.append(_row(NOTES[kind], ci_html(r.get("mean_of_video_medians")), ci_html(g.get("mean_of_video_medians")), "—", proto))
    rn = result.get("rnds", {})
    if "mean_over_chunks_2_to_C" in rn:
        rows.append(_row(NOTES["rnds"], "—", ci_html(rn["mean_over_chunks_2_to_C"]), "—", f"scorer: {rn.get('scorer')}"))
    return rows


def summary_html(result: dict[str, Any]) -> list[str]:
    """The summary section: headline metrics with direction, intervals, references and caveats."""
    rows = _detection_rows(result) + _lane_rows(result) + _video_rows(result)
    if not rows:
        return []
    header = ["metric", "better", "real", "generated", "gap (real - gen)", "paper (published)", "protocol and caveats"]
    return ["<h2>Summary</h2>", table_html(header, rows),
            "<p class=note>Intervals are 95% percentile bootstrap intervals; the unit resampled is named per row "
            "(frames for LET and lanes, paired across the sides; clips with all their views for FID, FVD, TSE and CSE).</p>"]  # fmt: skip
