"""`avsim sim SCENARIO OUT`: one closed-loop episode, scored, written as a native scenario.

`run_sim` loads the scenario, builds the simulator (agents, controller, cameras), runs the policy
(`avsim.sim.episode.run_episode`), scores the rollout (`avsim.sim.metrics`) and writes, atomically,

- `OUT/scenario/`: the rollout as a native scenario (`avsim render`, `labels`, `view`, `validate`,
  `eval`, `export-scene` read it; `avsim view OUT/scenario --before SCENARIO` shows it beside the log);
- `OUT/sim_metrics.json`: how the episode ended, NAVSIM's scores (PDMS, EPDMS, human-filtered
  EPDMS and every sub-score) as their mean over the 4 s windows (`episode`, the headline) and of
  the whole rollout as one proposal (`rollout`), the route read from the log (`route`: its lanes,
  length, the log's driven length and progress along it), avsim's rule findings for the ego, and
  the settings (same inputs and seed: same bytes);
- `OUT/steps.parquet`: one row per step: the ego's state and commands, the per-step facts
  (contact, areas, red zone, route progress) and the scores of the 4 s window from that step;
- `OUT/timing.json`: the policy's and the episode's wall times (not deterministic, kept apart).

A policy that fails (raises, bad output, over budget) ends the episode early: everything above is
still written for the steps it drove, with `status: policy_error` and the reason, and the command
exits 1 (`SimSummary.exit_code`); so does SIGINT or SIGTERM in the command (`interruptible`:
`status: interrupted`, `avsim.sim.interrupts`).
"""

from __future__ import annotations

import json
import math
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from enum import Enum
from pathlib import Path
from typing import Any

from avsim.core.atomic import atomic_output_path, output_errors, removed_if_empty_on_error
from avsim.core.errors import AvsimInputError, AvsimValueError
from avsim.core.locks import output_lock
from avsim.core.trajectory import NS_PER_S
from avsim.render.run.memory import RENDER_MIB_PER_MPX
from avsim.render.run.plan import MAX_SIDE_PX
from avsim.scenario import Scenario
from avsim.sim.alpasim.address import is_driver_address
from avsim.sim.chunks import ChunkPlanPolicy, ChunkSchedule, ReplanMode
from avsim.sim.episode import DEFAULT_BUDGET_S, EpisodeResult, policy_name, run_episode
from avsim.sim.generated.options import GenerationOptions
from avsim.sim.interrupts import Interrupted, interrupted_result, stop_on_signals
from avsim.sim.metrics import EpisodeScorer, rule_findings
from avsim.sim.observation import NoCameras, ObservationSource
from avsim.sim.policies import BuiltinPolicy, load_policy
from avsim.sim.recorder import rollout_scenario
from avsim.sim.stepper import MAX_RATE_HZ, MAX_SIM_STEPS, AgentMode, Controller, SimConfig, Simulator
from avsim.sim.steps_table import step_table
from avsim.sim.traffic import IDMConfig

METRICS_JSON = "sim_metrics.json"
STEPS_PARQUET = "steps.parquet"
TIMING_JSON = "timing.json"
SCENARIO_DIR = "scenario"
GENERATED_DIR = "generated"
FORMAT = "avsim-sim-v1"
MAX_BUDGET_S = 600.0  # CPU seconds a policy call may be given (`--budget`)
MAX_SIM_RENDER_MIB = 2048  # what rendering one step may take: 7 cameras at 3840x2160 fit, at 8192x8192 do not


def render_mib(cameras: int, size: tuple[int, int]) -> float:
    """Estimated MiB of rendering `cameras` images of `size` a step: each camera's ray map and buffers
    (`avsim.render.run.memory.RENDER_MIB_PER_MPX`) and its RGB frame handed to the policy."""
    mpx = size[0] * size[1] / 1e6
    return cameras * mpx * (RENDER_MIB_PER_MPX + 3e6 / 2**20)


class Observe(str, Enum):
    """The policy's camera frames: none, the rendered control frames, or video generated from them."""

    NONE = "none"
    CONTROL = "control"
    GENERATED = "generated"


@dataclass(frozen=True)
class SimOptions:
    """What `avsim sim` runs: policy (built-in name, MODULE:CALLABLE or alpasim://HOST:PORT), agents,
    what the policy sees (observe: None means control frames when `cameras` is given, else none),
    cameras (None: none, or the model's views when generating; () : every camera of the rig), image
    size and backend, length (steps or duration_s, None: the scenario's span), seed, rate,
    controller ("auto": perfect for the expert, else lqr), the policy's time budget per call,
    per-step window scores; with generated frames the model (`generation`) and how the policy
    re-plans inside a chunk (`replan`)."""

    policy: str = BuiltinPolicy.IDM.value
    agents: AgentMode = AgentMode.LOG
    cameras: tuple[str, ...] | None = None
    size: tuple[int, int] = (1280, 720)
    backend: str = "numba"
    steps: int | None = None
    duration_s: float | None = None
    seed: int = 0
    rate_hz: float = 10.0
    controller: str = "auto"
    budget_s: float = DEFAULT_BUDGET_S
    step_scores: bool = True
    idm: IDMConfig = field(default_factory=IDMConfig)
    observe: Observe | None = None
    generation: GenerationOptions | None = None
    replan: ReplanMode = ReplanMode.HOLD

    def __post_init__(self) -> None:
        """Bounds of every option that sizes memory or time, checked before anything is made (`AvsimValueError`
        naming the option; `avsim sim` shows it as a usage error)."""
        if self.steps is not None and not 1 <= self.steps <= MAX_SIM_STEPS:
            raise AvsimValueError(f"--steps: must be 1 to {MAX_SIM_STEPS} (one hour at 10 Hz), got {self.steps}")
        if not (math.isfinite(self.rate_hz) and 0 < self.rate_hz <= MAX_RATE_HZ):
            raise AvsimValueError(f"--rate: must be in (0, {MAX_RATE_HZ:g}] steps per second, got {self.rate_hz}")
        if self.duration_s is not None and not (math.isfinite(self.duration_s) and 0 < self.duration_s * self.rate_hz <= MAX_SIM_STEPS):
            raise AvsimValueError(f"--duration: must be > 0 and at most {MAX_SIM_STEPS} steps at --rate {self.rate_hz:g} "
                                  f"({MAX_SIM_STEPS / self.rate_hz:g} s), got {self.duration_s}")  # fmt: skip
        if not (math.isfinite(self.budget_s) and 0 < self.budget_s <= MAX_BUDGET_S):
            raise AvsimValueError(f"--budget: must be in (0, {MAX_BUDGET_S:g}] CPU seconds, got {self.budget_s}")
        w, h = self.size
        if not (0 < w <= MAX_SIDE_PX and 0 < h <= MAX_SIDE_PX and w % 2 == 0 and h % 2 == 0):
            raise AvsimValueError(f"--size: width and height must be positive, even and at most {MAX_SIDE_PX}, got {w}x{h}")
        if self.seed < 0 or self.seed >= 2**63:
            raise AvsimValueError(f"--seed: must be in [0, 2**63), got {self.seed}")

    @property
    def observe_mode(self) -> Observe:
        """`observe`, or what `cameras` implies."""
        if self.observe is not None:
            return Observe(self.observe)
        return Observe.NONE if self.cameras is None else Observe.CONTROL

    def config(self) -> SimConfig:
        """The simulator's config."""
        if self.steps is not None and self.duration_s is not None:
            raise AvsimInputError("options", "--steps/--duration", "give one of them, not both")
        steps = self.steps
        if self.duration_s is not None:
            if not self.duration_s > 0:
                raise AvsimInputError("options", "--duration", f"must be > 0, got {self.duration_s}")
            steps = max(int(round(self.duration_s * self.rate_hz)), 1)
        controller = self.controller
        if controller == "auto":
            controller = Controller.PERFECT.value if self.policy == BuiltinPolicy.EXPERT.value else Controller.LQR.value
        if controller not in (c.value for c in Controller):
            raise AvsimInputError("options", "--controller", f"expected auto, lqr or perfect, got {controller!r}")
        return SimConfig(rate_hz=self.rate_hz, agents=AgentMode(self.agents), controller=Controller(controller), steps=steps,
                         seed=self.seed, idm=self.idm)  # fmt: skip

    def source(self, video_dir: Path | None = None, on_phase: Callable[[str], None] | None = None) -> ObservationSource:
        """The camera frames' source (`video_dir`: where generated video is streamed)."""
        mode = self.observe_mode
        if mode is Observe.NONE:
            return NoCameras()
        if mode is Observe.CONTROL:
            from avsim.sim.render_source import RenderedControlSource

            return RenderedControlSource(self.cameras or None, self.size, self.backend)
        from avsim.sim.generated.progress import generated_source

        return generated_source(self.generation or GenerationOptions(), self.cameras or None, self.backend, video_dir, on_phase, _stderr)


def _stderr(message: str) -> None:
    print(message, file=sys.stderr)


@dataclass(frozen=True)
class SimSummary:
    """What `run_sim` did: the output folder, how the episode ended, its headline scores; the command's
    exit code (128 + the signal's number for an interrupted episode, else 0)."""

    out: Path
    status: str
    end_reason: str
    steps: int
    scores: dict[str, Any]
    wall_s: float
    exit_code: int = 0


def check_render_memory(scenario: Scenario, options: SimOptions) -> None:
    """Refuse cameras and a size whose rendering would need more than `MAX_SIM_RENDER_MIB` a step.

    Args:
        scenario: the scenario (its rig: `--cameras all`).
        options: the options.
    """
    if options.observe_mode is not Observe.CONTROL:
        return
    n = len(options.cameras) if options.cameras else len(scenario.rig)
    mib = render_mib(n, options.size)
    if mib > MAX_SIM_RENDER_MIB:
        w, h = options.size
        raise AvsimInputError("--size/--cameras", "memory", f"{n} cameras at {w}x{h} need about {mib:.0f} MiB to render each step, more "
                              f"than the {MAX_SIM_RENDER_MIB} a sim may use (fewer cameras or a smaller --size)")  # fmt: skip


def check_sim_output(out: Path) -> None:
    """Refuse an OUT that is a file or a non-empty folder that is not an `avsim sim` output."""
    if out.exists() and (not out.is_dir() or (any(out.iterdir()) and not (out / METRICS_JSON).is_file())):
        raise AvsimInputError(out, "OUT", "exists and is not an empty folder or an `avsim sim` output; refusing to replace it")


def run_sim(scenario_dir: Path, out: Path, options: SimOptions, on_step: Callable[[int, int], None] | None = None,
            scenario: Scenario | None = None, on_phase: Callable[[str], None] | None = None, interruptible: bool = False,
            wait: bool = False) -> SimSummary:  # fmt: skip
    """Run one episode and write its outputs (see the module docstring).

    Args:
        scenario_dir: the scenario folder.
        out: the output folder (replaced as a whole).
        options: what to run.
        on_step: progress, called with (steps done, steps planned).
        scenario: the loaded scenario (None: read from `scenario_dir`).
        on_phase: called with the name of each long phase (a chunk being generated, scoring, writing).
        interruptible: SIGINT / SIGTERM end the episode and its rollout so far is written (`avsim.sim.interrupts`;
            the command's behaviour, not a job worker's).
        wait: when another process is writing `out`, wait for it (else one line at once; `avsim.core.locks`).

    Returns:
        The summary; a full or read-only disk is `AvsimOutputError` (`OUT: disk full`), nothing left behind.

    Raises:
        Interrupted: a signal arrived before the first step was recorded (nothing written).
    """
    from avsim.scenario.io import load_scenario

    check_sim_output(out)
    scenario = scenario if scenario is not None else load_scenario(scenario_dir)
    check_render_memory(scenario, options)
    options.config()  # its own checks, before anything is written
    with removed_if_empty_on_error(out), output_errors(out), output_lock(out, wait=wait):
        check_sim_output(out)  # again: another run may have written it while this one waited
        return _run_locked(scenario, out, options, on_step, on_phase, interruptible)


def _run_locked(scenario: Scenario, out: Path, options: SimOptions, on_step: Callable[[int, int], None] | None,
                on_phase: Callable[[str], None] | None, interruptible: bool) -> SimSummary:  # fmt: skip
    """`run_sim` inside its lock: the episode, its scores, the outputs written atomically."""
    with atomic_output_path(out, is_dir=True) as tmp:
        tmp.mkdir(parents=True, exist_ok=True)
        video_dir = tmp / GENERATED_DIR if options.observe_mode is Observe.GENERATED else None
        source = options.source(video_dir, on_phase)
        policy = _policy(options, source)
        t0, exit_code = time.perf_counter(), 0
        sim = Simulator(scenario, options.config(), source)
        if on_step is not None:
            on_step(0, sim.n_steps)  # the total from the start (the first step of generated frames takes a chunk)
        try:
            with stop_on_signals(interruptible):
                result = run_episode(sim, policy, options.budget_s, on_step=None if on_step is None else lambda k: on_step(k, sim.n_steps))
        except Interrupted as exc:
            result, exit_code = interrupted_result(sim, exc), exc.exit_code
        finally:
            source.close()
            _close_policy(policy)
        wall = time.perf_counter() - t0
        if result.status == "policy_error":
            exit_code = 1  # the rollout is written (it is the evidence) and the command still fails
        doc = _write_outputs(tmp, scenario, sim, options, policy, result, wall, on_phase)
    return SimSummary(out, result.status, result.end_reason, result.steps, doc["episode"], wall, exit_code)


def _policy(options: SimOptions, source: ObservationSource) -> Any:
    """The policy to run: an AlpaSim driver (alpasim://) or the named one, planning once per chunk when
    generated frames wait for the next chunk."""
    if is_driver_address(options.policy):
        from avsim.sim.alpasim.driver import AlpasimDriverPolicy

        policy: Any = AlpasimDriverPolicy(options.policy, options.budget_s, rig=lambda: getattr(source, "rig", None))
    else:
        policy = load_policy(options.policy)
    schedule = getattr(source, "schedule", None)  # a generated source's chunks
    if isinstance(schedule, ChunkSchedule) and options.replan is ReplanMode.WAIT:
        return ChunkPlanPolicy(policy, schedule)
    return policy


def _close_policy(policy: Any) -> None:
    """Call `policy.close()` when it has one (a remote driver closes its session)."""
    close = getattr(policy, "close", None)
    if callable(close):
        close()


def _write_outputs(tmp: Path, scenario: Scenario, sim: Simulator, options: SimOptions, policy: Any, result: EpisodeResult, wall: float,
                   on_phase: Callable[[str], None] | None) -> dict[str, Any]:  # fmt: skip
    """Score the episode and write the rollout, the metrics, the per-step table and the timings into `tmp`."""
    from avsim.scenario.io import save_scenario

    assert sim.recorder is not None
    meta = settings(options, sim, policy_name(policy), result)
    rollout = rollout_scenario(scenario, sim.recorder, sim.step_times_ns, meta, f"{scenario.scenario_id}_sim")
    if on_phase is not None:
        on_phase("scoring")
    doc, table = score_documents(sim, rollout, result, meta, options.step_scores)
    timing: dict[str, Any] = {"episode_wall_s": round(wall, 4), "policy_total_s": round(result.policy_total_s, 4),
                              "policy_max_s": round(result.policy_max_s, 4), "steps": result.steps,
                              "steps_per_s": round(result.steps / wall, 2) if wall > 0 else None}  # fmt: skip
    summary = getattr(sim.source, "summary", None)
    if callable(summary):
        doc["generation"] = summary()
        timing["chunks"] = sim.source.timing()  # type: ignore[attr-defined]
    if on_phase is not None:
        on_phase("writing")
    save_scenario(rollout, tmp / SCENARIO_DIR)
    (tmp / METRICS_JSON).write_text(json.dumps(doc, indent=1, sort_keys=True, allow_nan=False) + "\n", encoding="utf-8")
    table.write_parquet(tmp / STEPS_PARQUET)
    (tmp / TIMING_JSON).write_text(json.dumps(timing, indent=1) + "\n", encoding="utf-8")
    return doc


def settings(options: SimOptions, sim: Simulator, name: str, result: EpisodeResult) -> dict[str, Any]:
    """The episode's settings and outcome (also stored in the rollout scenario's metadata)."""
    cfg = sim.config
    return {"format": FORMAT, "source_scenario_id": sim.scenario.scenario_id, "policy": options.policy, "policy_name": name,
            "agents": cfg.agents.value, "controller": cfg.controller.value, "seed": int(cfg.seed), "rate_hz": cfg.rate_hz,
            "steps_planned": int(sim.n_steps), "steps_run": int(result.steps), "status": result.status,
            "end_reason": result.end_reason, "cameras": list(sim.source.camera_names), "observe": options.observe_mode.value,
            "replan": options.replan.value if options.observe_mode is Observe.GENERATED else None,
            "idm": {k: list(v) if isinstance(v, tuple) else v for k, v in asdict(cfg.idm).items()} if cfg.agents is AgentMode.IDM else None,
            "start_ns": int(sim.step_times_ns[0]), "duration_s": round(result.steps / cfg.rate_hz, 6)}  # fmt: skip


def score_documents(sim: Simulator, played: Scenario, result: EpisodeResult, meta: dict[str, Any],
                    step_scores: bool) -> tuple[dict[str, Any], Any]:  # fmt: skip
    """`sim_metrics.json`'s document and the per-step table of a finished episode."""
    assert sim.recorder is not None
    scorer = EpisodeScorer(sim, sim.recorder.plans)
    windows = scorer.per_step() if step_scores else [{} for _ in range(sim.recorder.n_recorded)]
    rollout = _clean(scorer.rollout())
    episode = _clean(scorer.episode(windows, rollout))
    findings = rule_findings(played, sim.road) if sim.recorder.n_recorded > 1 else []
    doc = {"format": FORMAT, "settings": meta, "episode": episode, "rollout": rollout, "route": sim.route.summary(sim.road, sim.log_centers),
           "rules": {"findings": findings, "counts": _counts(findings)},
           "time_s": round((int(sim.step_times_ns[sim.recorder.n_recorded - 1]) - int(sim.step_times_ns[0])) / NS_PER_S, 6)}  # fmt: skip
    return doc, step_table(sim, scorer, windows)


def _counts(findings: list[dict[str, Any]]) -> dict[str, int]:
    out: dict[str, int] = {}
    for f in findings:
        out[f["kind"]] = out.get(f["kind"], 0) + 1
    return out


def _clean(doc: dict[str, Any]) -> dict[str, Any]:
    """Floats rounded to 6 decimals (stable JSON)."""
    return {k: (round(v, 6) if isinstance(v, float) else v) for k, v in doc.items()}
