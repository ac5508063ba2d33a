"""The detection-gap report's presentation: matplotlib figures (base64 PNG) and the
self-contained HTML page, both computed from the JSON-ready report dict that
`avsim.evaluation.report.build_report` returns. No scripts and no external resources; the
same report gives the same bytes.
"""

from __future__ import annotations

import base64
import html
import io
import math
import textwrap
from typing import Any

import numpy as np

from avsim.evaluation.report_config import LANE_METRICS
from avsim.evaluation.report_reference import CSE_CAVEAT, FRECHET_CAVEAT, RNDS_CAVEAT
from avsim.evaluation.report_summary import ci_html as _ci
from avsim.evaluation.report_summary import fmt as _fmt
from avsim.evaluation.report_summary import summary_html
from avsim.evaluation.report_summary import table_html as _table

CSS = ("body{font-family:system-ui,sans-serif;margin:2em;max-width:1500px;color:#1a202c}"
       ".wrap{overflow-x:auto;max-width:100%}"
       "table{border-collapse:collapse;margin:0.5em 0 1em}td,th{border:1px solid #cbd5e0;padding:4px 8px;text-align:left;"
       "vertical-align:top;overflow-wrap:break-word}.better{color:#2f855a;font-size:0.9em}.num,.ci span{white-space:nowrap}"
       ".proto{font-size:0.85em;color:#4a5568;min-width:14em}"
       "th{background:#edf2f7}.ci{color:#4a5568;font-size:0.9em;white-space:nowrap}"
       "@media (max-width:900px){body{margin:0.8em}td,th{padding:3px 4px;font-size:0.9em}.ci{white-space:normal}}"
       ".skip{color:#a0aec0}.note{color:#4a5568;font-size:0.9em}"
       "img{display:block;max-width:100%;margin:0.5em 0 1.5em}"
       ".warn{border-left:4px solid #dd6b20;background:#fffaf0;padding:0.2em 1em;margin:1em 0}")  # fmt: skip

Triple = tuple[float, float, float]  # estimate, interval low, interval high


# --------------------------------------------------------------------------- figures


def _pyplot() -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _png(fig: Any) -> str:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=90, metadata={"Software": None})
    import matplotlib.pyplot as plt

    plt.close(fig)
    return base64.b64encode(buf.getvalue()).decode("ascii")


def _bars(labels: list[str], series: dict[str, list[Triple]], title: str, ylabel: str) -> str:
    """Grouped bars with interval whiskers; the figure widens with the number of groups (0.9 in each past 7) so
    that two-line labels ("vehicle" over "[0, 30)") never run into each other."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(max(7.0, 0.9 * len(labels)), 3.6))
    x = np.arange(len(labels))
    width = 0.8 / max(len(series), 1)
    colors = ["#2b6cb0", "#dd6b20", "#38a169", "#805ad5"]
    for i, (name, vals) in enumerate(series.items()):
        est = np.array([v[0] for v in vals], dtype=float)
        lo = np.array([v[1] for v in vals], dtype=float)
        hi = np.array([v[2] for v in vals], dtype=float)
        err = np.vstack([np.nan_to_num(est - lo), np.nan_to_num(hi - est)]).clip(0)
        ax.bar(x + (i - (len(series) - 1) / 2) * width, np.nan_to_num(est), width, yerr=err, capsize=3, label=name, color=colors[i % 4])
    ax.set_xticks(x, labels, fontsize=8 if len(labels) > 6 else None)
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.legend()
    ax.grid(axis="y", alpha=0.3)
    fig.tight_layout()
    return _png(fig)


def _triple(d: dict[str, Any]) -> Triple:
    return d["estimate"], d["ci_low"], d["ci_high"]


def _detection_figures(det: dict[str, Any], figs: dict[str, str]) -> None:
    iv = det["intervals"]
    cls = det["classes"]
    s = {side: [_triple(iv[f"{c}/ap/{side}"]) for c in cls] for side in ("real", "generated")}
    figs["let_ap_per_class"] = _bars(cls, s, "LET-3D-AP per class (95% bootstrap CI)", "LET-3D-AP")
    labels: list[str] = []
    real_v: list[Triple] = []
    gen_v: list[Triple] = []
    for c in cls:
        for rng_name, v in det["per_range"].get(c, {}).items():
            if rng_name == "all":
                continue
            labels.append(f"{c}\n{rng_name}")
            for side, dst in (("real", real_v), ("generated", gen_v)):
                d = iv.get(f"{c}/range {rng_name}/ap/{side}")
                dst.append(_triple(d) if d else (v[f"ap_{side}"],) * 3)
    if labels:
        figs["let_ap_per_range"] = _bars(labels, {"real": real_v, "generated": gen_v}, "LET-3D-AP per range bin (95% CI)", "LET-3D-AP")


def _lane_figure(lanes: dict[str, Any]) -> str:
    iv = lanes["intervals"]
    s = {side: [_triple(iv[f"{m}/{side}"]) for m in ("f_score", "precision", "recall")] for side in ("real", "generated")}
    return _bars(["F1", "precision", "recall"], s, "Lane metrics (OpenLane) real vs generated", "value")


def _sampson_figure(samp: dict[str, Any]) -> str:
    plt = _pyplot()
    fig, axes = plt.subplots(1, 2, figsize=(8, 3.4))
    for ax, kind in zip(axes, ("tse", "cse")):
        data, names = [], []
        for side in ("real", "generated"):
            vals = [v["median_of_frame_medians_px"] for v in samp["per_video"][side][kind].values()]
            vals = [v for v in vals if v is not None and math.isfinite(v)]
            if vals:
                data.append(vals)
                names.append(side)
        if data:
            ax.boxplot(data, tick_labels=names)
            ax.grid(axis="y", alpha=0.3)
        else:  # say why, wrapped to the panel, with no axes (there is nothing to read off them)
            why = samp.get(f"{kind}/real", {}).get("skipped") or samp.get(f"{kind}/generated", {}).get("skipped", "no finite values")
            ax.text(0.5, 0.5, "no data:\n" + textwrap.fill(why, 38), ha="center", va="center", fontsize=8,
                    transform=ax.transAxes)  # fmt: skip
            ax.set_axis_off()
        ax.set_title(f"{kind.upper()} per-video median (px)")
    fig.tight_layout()
    return _png(fig)


def _rnds_figure(rnds: dict[str, Any]) -> str:
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(6, 3.4))
    c = np.arange(1, len(rnds["curve"]) + 1)
    ax.plot(c, rnds["curve"], marker="o", color="#2b6cb0", label="mean RNDS")
    ax.fill_between(c, rnds["band_low"], rnds["band_high"], alpha=0.25, color="#2b6cb0", label="95% band")
    ax.axhline(1.0, color="gray", lw=0.8)
    ax.set_xticks(c)
    ax.set_xlabel("chunk")
    ax.set_ylabel("RNDS")
    ax.set_title(f"RNDS ({rnds['scorer']})")
    ax.legend()
    fig.tight_layout()
    return _png(fig)


def figures(result: dict[str, Any]) -> dict[str, str]:
    """Every plot the report's sections have data for: name -> base64 PNG."""
    _pyplot()
    figs: dict[str, str] = {}
    det = result.get("detection")
    if det and "classes" in det:
        _detection_figures(det, figs)
    lanes = result.get("lanes")
    if lanes and "intervals" in lanes:
        figs["lane_f1"] = _lane_figure(lanes)
    samp = result.get("sampson")
    if samp and "per_video" in samp:
        figs["sampson"] = _sampson_figure(samp)
    rnds = result.get("rnds")
    if rnds and "curve" in rnds:
        figs["rnds"] = _rnds_figure(rnds)
    return figs


# --------------------------------------------------------------------------- html


def _warnings_html(result: dict[str, Any]) -> list[str]:
    lines = result.get("warnings", [])
    if not lines:
        return []
    items = "".join(f"<li>{html.escape(w)}</li>" for w in lines)
    return [f"<div class=warn><h2>Read these numbers with care</h2><ul>{items}</ul></div>"]


def _img(figs: dict[str, str], key: str, alt: str) -> str:
    return f'<img alt="{html.escape(alt)}" src="data:image/png;base64,{figs[key]}">' if key in figs else ""


def _skipped(section: dict[str, Any] | None, default: str) -> str:
    return f"<p class=skip>Skipped: {html.escape(str((section or {}).get('skipped', default)))}</p>"


def _header_html(result: dict[str, Any]) -> list[str]:
    inputs, settings = result["inputs"], result["settings"]
    return ["<h1>avsim detection-gap report</h1>",
            f"<p>Real: <code>{html.escape(inputs['real'])}</code> &middot; Generated: "
            f"<code>{html.escape(inputs['generated'])}</code> &middot; Ground truth: "
            f"<code>{html.escape(str(inputs.get('ground_truth')))}</code></p>",
            f"<p class=note>Intervals: {int(settings['level'] * 100)}% percentile bootstrap, "
            f"{settings['n_resamples']} resamples, seed {settings['seed']}; unit stated per section.</p>", *_instants_html(result)]  # fmt: skip


def _instants_html(result: dict[str, Any]) -> list[str]:
    """How many instants LET and lanes are scored on (both sides have them), and the ground truth rule."""
    inst, gt = result.get("instants"), result.get("ground_truth") or {}
    out = []
    if inst:
        out.append(f"<p>Detection and lanes are scored on the <b>{inst['instants']}</b> instants both sides have (real "
                   f"{inst['real']}, generated {inst['generated']}; an instant is a clip and a timestamp).</p>")
    if "gt_visibility" in gt:
        out.append(f"<p class=note>Ground truth (--gt-visibility {html.escape(', '.join(gt['gt_visibility']))}): over all the --gt "
                   f"side's instants, {gt['boxes']} labelled boxes shown by the evaluated cameras ({html.escape(', '.join(gt['cameras']))}) "
                   f"and {gt['boxes_seen_by_no_evaluated_camera']} no evaluated camera shows, which are not scored.</p>")  # fmt: skip
    return out


def _detection_html(det: dict[str, Any] | None, figs: dict[str, str]) -> list[str]:
    parts = ["<h2>Detection (LET-3D-AP, Waymo camera-only)</h2>"]
    if not (det and "classes" in det):
        return parts + [_skipped(det, "no inputs")]
    iv = det["intervals"]
    rows = []
    names = {"waymo_mean": "Waymo mean (vehicle, pedestrian, cyclist)", "mean_over_classes_with_gt": "mean over classes with GT"}
    for c in ["waymo_mean", "mean_over_classes_with_gt"] + det["classes"]:
        for m in ("ap", "apl", "aph"):
            rows.append([html.escape(names.get(c, c)), m.upper(), _ci(iv[f"{c}/{m}/real"]), _ci(iv[f"{c}/{m}/generated"]),
                         _ci(iv[f"{c}/{m}/gap"])])  # fmt: skip
    parts.append(_table(["class", "metric", "real", "generated", "gap (real - gen)"], rows))
    parts.append(f"<p class=note>LET-3D-AP/APL/APH: higher is better; gap (real - generated): closer to 0 is better. "
                 f"Resampling unit: frame ({det['frames']} frames with boxes of the {det.get('instants', det['frames'])} instants "
                 "scored), paired across real and generated. The headline is "
                 "Waymo's leaderboard mean over vehicle, pedestrian and cyclist (absent classes count as 0).</p>")
    rrows = []
    for c in det["classes"]:
        for rng_name, v in det["per_range"].get(c, {}).items():
            k = f"{c}/range {rng_name}/ap"
            if rng_name == "all" or f"{k}/real" not in iv:
                continue
            rrows.append([html.escape(c), html.escape(rng_name), str(v["num_gt"]), _ci(iv[f"{k}/real"]),
                          _ci(iv[f"{k}/generated"]), _ci(iv[f"{k}/gap"])])
    if rrows:
        parts.append(_table(["class", "range (m)", "#GT", "AP real", "AP generated", "gap"], rrows))
    return parts + [_img(figs, "let_ap_per_class", "LET-AP per class"), _img(figs, "let_ap_per_range", "LET-AP per range bin")]


def _lanes_html(lanes: dict[str, Any] | None, figs: dict[str, str]) -> list[str]:
    parts = ["<h2>Lanes (OpenLane 3-D lane metrics)</h2>"]
    if not (lanes and "intervals" in lanes):
        return parts + [_skipped(lanes, "no inputs")]
    iv = lanes["intervals"]
    better = {n: "lower" if "error" in n else "higher" for n in LANE_METRICS}
    rows = [[f"{n} <span class=better>{better[n]} is better</span>", _ci(iv[f"{n}/real"]), _ci(iv[f"{n}/generated"]),
             _ci(iv[f"{n}/gap"])] for n in LANE_METRICS]  # fmt: skip
    parts.append(_table(["metric", "real", "generated", "gap"], rows))
    return parts + ["<p class=note>Resampling unit: frame, paired across real and generated.</p>", _img(figs, "lane_f1", "lane F1")]


def _clips_html(clips: dict[str, Any] | None) -> list[str]:
    """Each side's clips: how many, views, frame rates, sizes and frame counts (differences are warnings)."""
    if not clips:
        return []
    rows = [[side, str(c["clips"]), str(c["views"]), ", ".join(f"{v:g}" for v in c["fps"]) or "n/a", html.escape(", ".join(c["sizes"])),
             html.escape(", ".join(str(v) for v in c["frames"]))] for side, c in (("real", clips["real"]), ("generated", clips["generated"]))]  # fmt: skip
    return ["<h2>Clips</h2>", _table(["side", "clips", "views", "fps", "size", "frames per view"], rows)]


def _video_html(vid: dict[str, Any]) -> list[str]:
    rows = []
    for kind in ("fid", "fvd"):
        d = vid.get(kind)
        if not d:
            continue
        if "skipped" in d:
            rows.append([kind.upper(), f"<span class=skip>skipped: {html.escape(d['skipped'])}</span>", "", ""])
        else:
            rows.append([html.escape(d["name"]), _ci(d["unbiased_n_minus_1"]), _ci(d["biased_n"]), html.escape(d["features"]["weights"])])
    header = ["metric (lower is better)", "covariance N-1 (original)", "covariance /N (StyleGAN-V)", "weights"]
    notes = []
    for kind in ("fid", "fvd"):
        r = vid.get(kind, {}).get("resampling")
        if r:
            notes.append(f"{kind.upper()}: resampling unit clip ({r['clips']['real']} real + {r['clips']['generated']} generated "
                         f"clips, {r['views']['real']} + {r['views']['generated']} views; all views of a clip drawn together)")
    note = f"<p class=note>{html.escape('; '.join(notes))}. {html.escape(FRECHET_CAVEAT)}</p>" if notes else ""
    return ["<h2>Video fidelity (FID, FVD)</h2>", _table(header, rows) if rows else "<p class=skip>Skipped: no videos</p>", note]


def _sampson_html(samp: dict[str, Any] | None, figs: dict[str, str]) -> list[str]:
    parts = ["<h2>Geometric consistency (Sampson error, px)</h2>"]
    if not (samp and "per_video" in samp):
        return parts + ["<p class=skip>Skipped: no videos</p>"]
    rows = []
    for key in ("tse/real", "tse/generated", "cse/real", "cse/generated"):
        d = samp.get(key)
        if d and "skipped" in d:
            rows.append([key.upper(), f"<span class=skip>no data: {html.escape(d['skipped'])}</span>", "", ""])
        elif d:
            rows.append([key.upper(), _ci(d["mean_of_video_medians"]), _fmt(d["median_px"]), str(d["videos"])])
    header = ["metric / side (lower is better)", "mean of per-video medians", "median of per-video medians", "videos"]
    note = (f"<p class=note>F: {html.escape(str(samp.get('f_source', 'RANSAC')))}; a frame counts with at least "
            f"{samp.get('min_matches_per_frame', 8)} matches. Resampling unit: clip (every view and view pair of a clip drawn "
            f"together). {html.escape(CSE_CAVEAT)}</p>")
    return parts + [_table(header, rows), *_rig_rows(samp), note, _img(figs, "sampson", "Sampson error distributions")]


def _rig_rows(samp: dict[str, Any]) -> list[str]:
    """Each side's clips: where the rig came from and the CSE pairs chosen (up to 12 clips a side)."""
    rows = []
    for side, rigs in samp.get("rigs", {}).items():
        for clip, r in list(rigs.items())[:12]:
            pairs = ", ".join(p.replace("+", " + ") for p in r["pairs"]) or "none"
            rows.append([side, html.escape(clip), html.escape(str(r["source"])), html.escape(pairs)])
    return [_table(["side", "clip", "rig (rectification)", "CSE camera pairs (fields of view overlap)"], rows)] if rows else []


def _rnds_html(rnds: dict[str, Any] | None, figs: dict[str, str]) -> list[str]:
    parts = ["<h2>Long-horizon drift (RNDS)</h2>"]
    if not (rnds and "curve" in rnds):
        return parts + [_skipped(rnds, "no chunk scores and no scorer")]
    return parts + [f"<p>Mean RNDS over chunks 2..C (higher is better; 1 = no drift): {_ci(rnds['mean_over_chunks_2_to_C'])}; "
                    f"scorer: {html.escape(rnds['scorer'])}. {html.escape(RNDS_CAVEAT) if rnds['scorer'] == 'sharpness' else ''}</p>",
                    _img(figs, "rnds", "RNDS curve")]  # fmt: skip


def render_html(result: dict[str, Any], figs: dict[str, str]) -> str:
    """The report page: every section's tables and the figures from `figures(result)`."""
    parts = _header_html(result)
    parts += _warnings_html(result)
    parts += summary_html(result)
    parts += _detection_html(result.get("detection"), figs)
    parts += _lanes_html(result.get("lanes"), figs)
    parts += _clips_html(result.get("clips"))
    parts += _video_html(result.get("video", {}))
    parts += _sampson_html(result.get("sampson"), figs)
    parts += _rnds_html(result.get("rnds"), figs)
    prov = result["provenance"]
    parts.append("<h2>Provenance</h2>" + _table(["item", "value"], [[html.escape(k), html.escape(str(v))] for k, v in prov.items()]))
    return ("<!DOCTYPE html><html lang=en><head><meta charset=utf-8><title>avsim detection-gap report</title>"
            f"<style>{CSS}</style></head><body>" + "\n".join(p for p in parts if p) + "</body></html>\n")
