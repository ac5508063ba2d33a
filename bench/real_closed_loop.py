"""The per-scene table of docs/closed_loop.md ("Real logs"): every converted real scene driven by the
expert (log replay) and the IDM planner, with the route read from its log.

    avsim run convert ../shared/data/scenarionet conv      # and the other real sources, one folder each
    python bench/real_closed_loop.py conv/* [--policies expert,idm] [--agents log] [--json OUT.json]

For each scene folder and policy, one `avsim sim` episode of the scenario's span
(`avsim.sim.run.run_sim`, its outputs in a temporary folder), then one markdown row: the log's
driven length and its progress along its route (and their ratio), the expert's PDMS and EPDMS
(window means), and the IDM planner's PDMS, EPDMS, NC, DAC, EP, TTC and the rollout's DAC. The
last rows are the means over the scenes. Wall times go to stderr (the machine is shared).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np


def run(folder: Path, policy: str, agents: str, out: Path) -> dict[str, Any]:
    """One episode's `sim_metrics.json` document."""
    from avsim.sim.run import SimOptions, run_sim
    from avsim.sim.stepper import AgentMode

    t0 = time.perf_counter()
    run_sim(folder, out, SimOptions(policy=policy, agents=AgentMode(agents), budget_s=60.0))
    print(f"{folder.name} {policy}: {time.perf_counter() - t0:.0f} s", file=sys.stderr, flush=True)
    return json.loads((out / "sim_metrics.json").read_text())


def row(name: str, docs: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """The table's values of one scene."""
    route = docs["expert"]["route"] if "expert" in docs else next(iter(docs.values()))["route"]
    out: dict[str, Any] = {"scene": name, "driven_m": route["log_driven_m"], "progress_m": route["log_progress_m"]}
    for policy, doc in docs.items():
        ep = doc["episode"]
        for key in ("pdms", "epdms", "no_at_fault_collisions", "drivable_area_compliance", "ego_progress", "time_to_collision_within_bound"):
            out[f"{policy}_{key}"] = ep.get(key)
        out[f"{policy}_windows"] = ep.get("windows_scored")
        out[f"{policy}_rollout_dac"] = doc["rollout"].get("drivable_area_compliance")
    return out


def table(rows: list[dict[str, Any]], policies: list[str]) -> str:
    """The markdown table, with the means."""
    def f(v: Any) -> str:
        return "-" if v is None else f"{v:.3f}" if isinstance(v, float) else str(v)

    head = ["scene", "driven m", "route progress m", "ratio"]
    if "expert" in policies:
        head += ["expert PDMS", "expert EPDMS"]
    if "idm" in policies:
        head += ["IDM PDMS", "IDM EPDMS", "IDM NC", "IDM DAC", "IDM EP", "IDM TTC", "IDM rollout DAC"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        ratio = r["progress_m"] / r["driven_m"] if r["driven_m"] > 1.0 else None
        cells = [r["scene"], f"{r['driven_m']:.1f}", f"{r['progress_m'] + 0.0:.1f}".replace("-0.0", "0.0"), f(ratio)]
        if "expert" in policies:
            cells += [f(r["expert_pdms"]), f(r["expert_epdms"])]
        if "idm" in policies:
            cells += [f(r[f"idm_{k}"]) for k in ("pdms", "epdms", "no_at_fault_collisions", "drivable_area_compliance", "ego_progress",
                                                  "time_to_collision_within_bound", "rollout_dac")]  # fmt: skip
        lines.append("| " + " | ".join(cells) + " |")
    mean = ["mean", "", "", ""]
    if "expert" in policies:
        mean += [f(float(np.mean([r["expert_pdms"] for r in rows]))), f(float(np.mean([r["expert_epdms"] for r in rows])))]
    if "idm" in policies:
        mean += [f(float(np.mean([r[f"idm_{k}"] for r in rows]))) for k in ("pdms", "epdms", "no_at_fault_collisions", "drivable_area_compliance",
                                                                             "ego_progress", "time_to_collision_within_bound", "rollout_dac")]  # fmt: skip
    lines.append("| " + " | ".join(mean) + " |")
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("scenarios", nargs="+", type=Path)
    ap.add_argument("--policies", default="expert,idm")
    ap.add_argument("--agents", default="log")
    ap.add_argument("--json", type=Path, default=None, help="also write the rows here")
    args = ap.parse_args()
    policies = args.policies.split(",")
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for folder in args.scenarios:
            docs = {p: run(folder, p, args.agents, Path(tmp) / f"{folder.name}_{p}") for p in policies}
            rows.append(row(folder.name, docs))
    print(table(rows, policies))
    if args.json is not None:
        args.json.write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
