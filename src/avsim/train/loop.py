"""The training loop: build, parallelise, resume, step, log, checkpoint, export.

`train(cfg)` runs in every process of a torchrun job (or alone). A step is a pure function of
(model state, optimiser state, step index, seed): the batch comes from a resumable sampler and
every random draw from generators seeded per (step, sample), so a resumed run continues bit for
bit and a run gives the same losses on any data-parallel / CP layout (up to reduction order).
"""

from __future__ import annotations

import json
import math
import os
import resource
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
from torch import Tensor, nn

from avsim.core.errors import AvsimInputError
from avsim.core.progress import progress_bar
from avsim.models.config import TransferConfig, get_config
from avsim.models.control import TransferDiT
from avsim.models.layout import frames_per_view
from avsim.train.checkpoint import CheckpointManager, load_full_model_state_dict
from avsim.train.config import TrainConfig
from avsim.train.data import LatentClipDataset, make_loader
from avsim.train.dist import Meshes, build_meshes, init_distributed
from avsim.train.ema import EMA
from avsim.train.flops import StepFlops, dit_flops, peak_flops
from avsim.train.objective import LossNormalization, NoisedBatch, flow_matching_loss, prepare_batch
from avsim.train.parallelize import parallelize
from avsim.train.schedule import lr_at
from avsim.train.ulysses import ContextParallel

CONTROL_PREFIXES = ("control_embedder.", "input_hint_block.", "control_blocks.")

StepCallback = Callable[[int, dict[str, Any]], None]


def is_control_param(name: str) -> bool:
    return name.startswith(CONTROL_PREFIXES)


def set_trainable(model: nn.Module, train_mode: str) -> int:
    """Freeze the base for control training; returns the number of trained parameters."""
    if train_mode not in ("control", "full"):
        raise ValueError(f"train_mode must be control or full, got {train_mode!r}")
    count = 0
    for name, p in model.named_parameters():
        p.requires_grad_(train_mode == "full" or is_control_param(name))
        count += p.numel() if p.requires_grad else 0
    return count


def load_net_file(path: str | os.PathLike[str]) -> dict[str, Tensor]:
    """A `net.*` state dict (torch or safetensors) -> keys without the prefix (models' reader)."""
    from avsim.models.checkpoint import load_dit_state_dict

    return load_dit_state_dict(path)


def build_model(model_cfg: TransferConfig, seed: int, on_meta: bool = False) -> TransferDiT:
    """The network in fp32 on the CPU (or on the meta device), identically on every rank."""
    torch.manual_seed(seed)
    if on_meta:
        with torch.device("meta"):
            return TransferDiT(model_cfg.dit)
    return TransferDiT(model_cfg.dit)


def _clip_and_norm(params: Sequence[nn.Parameter], max_norm: float) -> float:
    grads = [p for p in params if p.grad is not None]
    norm = torch.nn.utils.clip_grad_norm_(grads, max_norm if max_norm > 0 else math.inf, foreach=True)
    if hasattr(norm, "full_tensor"):
        norm = norm.full_tensor()
    return float(norm)


def _memory_gib(device: torch.device) -> float:
    if device.type == "cuda":
        return torch.cuda.max_memory_allocated(device) / 2**30
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20  # KiB -> GiB (Linux)


class _Logger:
    """Rank 0: a console progress bar and one JSON line per logged step."""

    def __init__(self, out_dir: Path, total: int, start: int, enabled: bool) -> None:
        self.enabled = enabled
        self.progress = None
        if not enabled:
            return
        out_dir.mkdir(parents=True, exist_ok=True)
        path = out_dir / "log.jsonl"
        if path.is_file():  # a resumed run: drop the records of steps it is about to redo
            kept = [ln for ln in path.read_text(encoding="utf-8").splitlines() if _logged_step(ln) <= start]
            path.write_text("".join(ln + "\n" for ln in kept), encoding="utf-8")
        self.file = open(path, "a", encoding="utf-8")  # noqa: SIM115 - closed in close()
        self.progress = progress_bar("train", unit="steps", extra_field="info", disable=not sys.stderr.isatty())
        self.progress.start()
        self.task = self.progress.add_task("", total=total, completed=start, info="")

    def log(self, record: dict[str, Any]) -> None:
        if not self.enabled:
            return
        self.file.write(json.dumps(record) + "\n")
        self.file.flush()
        info = f"loss {record['loss']:.4f} gnorm {record['grad_norm']:.3f} {record['tokens_per_s']:.0f} tok/s"
        if self.progress is not None and not self.progress.disable:
            self.progress.update(self.task, completed=record["step"], info=info)
        else:
            print(f"step {record['step']}: {info}", flush=True)

    def close(self) -> None:
        if self.enabled:
            if self.progress is not None:
                self.progress.stop()
            self.file.close()


def _logged_step(line: str) -> int:
    try:
        return int(json.loads(line)["step"])
    except (ValueError, KeyError, TypeError):
        return 1 << 62  # a torn last line (killed mid-write): drop it


def forward_loss(
    model: nn.Module, batch: dict[str, Any], nb: NoisedBatch, num_views: int,
    normalization: LossNormalization = "all_elements",
) -> Tensor:
    """The network on a noised batch and the masked velocity MSE (`flow_matching_loss`)."""
    text = batch["text"] * nb.text_keep.to(batch["text"].dtype)[:, None, None]
    b, _, vt, h, w = nb.x_sigma.shape
    velocity = model(
        nb.x_sigma,
        nb.timestep,
        text,
        condition_mask=nb.cond.expand(b, 1, vt, h, w),
        num_views=num_views,
        control_latent=batch["control"],
    )
    return flow_matching_loss(velocity, nb.x0, nb.eps, nb.cond, normalization)


@dataclass
class Setup:
    """A parallelised model with its optimiser and EMA, ready to step."""

    model_cfg: TransferConfig
    device: torch.device
    rank: int
    world_size: int
    meshes: Meshes | None
    dp_rank: int
    dp_size: int
    model: TransferDiT
    cp: ContextParallel | None
    trained: list[nn.Parameter]
    optimizer: torch.optim.Optimizer
    ema: EMA


def setup(cfg: TrainConfig, init_from: str = "") -> Setup:
    """Join the process group, build and parallelise the model, make optimiser and EMA.

    FSDP2 is used whenever there is more than one process, and on CUDA also for one (it is
    what applies the bf16 mixed precision); a single CPU process trains the plain module.
    """
    world_size = int(os.environ.get("WORLD_SIZE", 1))
    distributed = world_size > 1 or torch.cuda.is_available()
    world = init_distributed() if distributed else None
    device = world.device if world is not None else torch.device("cpu")
    rank = world.rank if world is not None else 0
    meshes: Meshes | None = None
    dp_rank, dp_size = 0, 1
    if world is not None:
        meshes = build_meshes(device.type, cfg.parallel.dp_replicate, cfg.parallel.cp)
        dp_rank, dp_size = meshes.dp_rank, meshes.dp_size
    elif cfg.parallel.cp != 1 or cfg.parallel.dp_replicate != 1:
        raise ValueError("cp and dp_replicate > 1 need a multi-process launch (torchrun)")

    model_cfg = get_config(cfg.model)
    model = build_model(model_cfg, cfg.seed, on_meta=bool(init_from) and meshes is not None)
    if init_from and meshes is None:
        model.load_state_dict(load_net_file(init_from), strict=True)
    set_trainable(model, cfg.train_mode)
    cp = parallelize(model, cfg.parallel, meshes, device)
    if meshes is None:
        model.to(device=device)
    elif init_from:
        model.to_empty(device=device)
        load_full_model_state_dict(model, load_net_file(init_from) if rank == 0 else {})
    trained = [p for p in model.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(
        trained,
        lr=cfg.optim.lr,
        betas=cfg.optim.betas,
        eps=cfg.optim.eps,
        weight_decay=cfg.optim.weight_decay,
        foreach=True,
    )
    return Setup(model_cfg, device, rank, world_size, meshes, dp_rank, dp_size, model, cp, trained, optimizer,
                 EMA(model, cfg.ema))


def train_step(
    s: Setup, cfg: TrainConfig, batch: dict[str, Any], step: int, num_views: int
) -> tuple[Tensor, float]:
    """One optimiser step on this rank's batch; returns (loss averaged over ranks, grad norm)."""
    x0 = batch["video"].float()
    first = s.dp_rank * x0.shape[0]
    nb = prepare_batch(x0, num_views, cfg.objective, seed=cfg.seed, step=step, first_sample=first)
    loss = forward_loss(s.model, batch, nb, num_views, cfg.objective.loss_normalization)
    # Under CP each rank's parameter gradients hold only its tokens' share; FSDP averages over
    # the CP ranks too, so scale them back up to a sum over the sequence.
    scale = s.cp.size if s.cp is not None and s.cp.active else 1
    (loss * scale).backward()
    for group in s.optimizer.param_groups:
        group["lr"] = lr_at(step, cfg.optim)
    grad_norm = _clip_and_norm(s.trained, cfg.optim.grad_clip)
    s.optimizer.step()
    s.optimizer.zero_grad(set_to_none=True)
    s.ema.update(s.model)
    loss_value = loss.detach()
    if dist.is_initialized():
        _avg(loss_value)
    return loss_value, grad_norm


def _step_record(
    s: Setup, cfg: TrainConfig, step: int, loss: Tensor, grad_norm: float, dt: float, flops: StepFlops, peak: float | None
) -> dict[str, Any]:
    """The log record of one finished step."""
    global_batch = cfg.data.batch_size * s.dp_size
    return {
        "step": step + 1,
        "loss": float(loss),
        "grad_norm": grad_norm,
        "lr": s.optimizer.param_groups[0]["lr"],
        "step_time_s": dt,
        "tokens_per_s": flops.tokens * global_batch / dt,
        "mfu": (flops.training(cfg.train_mode) * global_batch / dt / (peak * (s.world_size or 1))) if peak else None,
        "memory_gib": _memory_gib(s.device),
    }


def _resume(ckpt: CheckpointManager, resume_step: int | None, s: Setup) -> tuple[int, int]:
    """(first step to run, loader batch to start from) after loading the newest checkpoint."""
    if resume_step is None:
        return 0, 0
    meta = ckpt.load(resume_step, s.model, s.optimizer, s.ema)  # fields range-checked (checkpoint.META_LIMITS)
    if "loader_batch" not in meta:
        raise AvsimInputError(ckpt.path(resume_step) / "meta.json", "loader_batch", "missing: not a checkpoint of `avsim train run`")
    return int(meta["step"]), int(meta["loader_batch"])


def train(cfg: TrainConfig, callbacks: Sequence[StepCallback] = ()) -> list[dict[str, Any]]:
    """Run (or resume) `cfg`; returns the records of the steps this call ran."""
    out_dir = Path(cfg.out_dir)
    ckpt = CheckpointManager(out_dir / "checkpoints", keep=cfg.checkpoint.keep)
    resume_step = ckpt.latest()
    s = setup(cfg, init_from=cfg.checkpoint.init_from if resume_step is None else "")
    device = s.device
    start, loader_batch = _resume(ckpt, resume_step, s)
    dataset = LatentClipDataset(cfg.data.cache_dir)
    num_views = dataset.num_views
    loader = make_loader(
        dataset, cfg.data.batch_size, s.dp_rank, s.dp_size, cfg.seed, start_batch=loader_batch, num_workers=cfg.data.num_workers
    )
    flops = None
    records: list[dict[str, Any]] = []
    logger = _Logger(out_dir, cfg.steps, start, enabled=s.rank == 0)
    if s.rank == 0:
        (out_dir / "config.json").write_text(cfg.to_json(), encoding="utf-8")
    peak = peak_flops(torch.cuda.get_device_name(device)) if device.type == "cuda" else None
    try:
        batches = iter(loader)
        for step in range(start, cfg.steps):
            t0 = time.perf_counter()
            batch = next(batches)
            for key in ("video", "control", "text"):
                batch[key] = batch[key].to(device, non_blocking=True)
            loss_value, grad_norm = train_step(s, cfg, batch, step, num_views)
            if device.type == "cuda":
                torch.cuda.synchronize(device)
            dt = time.perf_counter() - t0
            if flops is None:
                _, _, _, h, w = batch["video"].shape
                flops = dit_flops(s.model_cfg.dit, num_views, frames_per_view(batch["video"], num_views), h, w)
            record = _step_record(s, cfg, step, loss_value, grad_norm, dt, flops, peak)
            records.append(record)
            if (step + 1) % cfg.log_every == 0 or step + 1 == cfg.steps:
                logger.log(record)
            done = step + 1
            if done == cfg.steps or (cfg.checkpoint.interval and done % cfg.checkpoint.interval == 0):
                ckpt.save(done, s.model, s.optimizer, s.ema, {"loader_batch": done, "model": cfg.model})
            for callback in callbacks:
                callback(done, record)
    finally:
        logger.close()
    return records


def _avg(t: Tensor) -> None:
    """Mean over all ranks (sum then divide: gloo has no AVG)."""
    dist.all_reduce(t)
    t /= dist.get_world_size()


def export_net(
    cfg: TrainConfig,
    out_path: str | os.PathLike[str],
    *,
    use_ema: bool = True,
    step: int | None = None,
    dtype: torch.dtype = torch.bfloat16,
) -> Path:
    """Write a single-file `net.*` state dict (bf16) from a checkpoint of `cfg`'s run.

    Runs in one process: the sharded checkpoint is resharded onto an unsharded model.
    ``use_ema``: the EMA replaces the trained parameters (the released checkpoints are EMA).
    """
    ckpt = CheckpointManager(Path(cfg.out_dir) / "checkpoints")
    step = step if step is not None else ckpt.latest()
    if step is None:
        raise AvsimInputError(ckpt.folder, "checkpoint", "no complete checkpoint to export")
    model_cfg = get_config(cfg.model)
    model = build_model(model_cfg, cfg.seed)
    set_trainable(model, cfg.train_mode)
    ema = EMA(model, cfg.ema)
    ckpt.load(step, model, None, ema if use_ema else None)
    if use_ema:
        ema.copy_to(model)
    from avsim.models.checkpoint import save_net_state_dict

    out = Path(out_path)
    save_net_state_dict(model, out, dtype=dtype)
    return out


def train_entry(cfg: TrainConfig) -> None:
    """`train` without a return value: the target of `avsim train run --nproc N`."""
    train(cfg)
