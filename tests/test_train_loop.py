"""Single-process training pieces: objective, sampler, data cache, activation checkpointing, export."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from torch.multiprocessing.reductions import StorageWeakRef
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten

from avsim.models.config import debug as debug_model
from avsim.train.config import ParallelConfig, apply_overrides, debug, load_config
from avsim.train.data import BLANK_FILE, ClipBatchSampler, ClipSpec, LatentClipDataset, collate
from avsim.train.encode import save_tensors, write_index
from avsim.train.objective import (
    ObjectiveConfig,
    condition_mask,
    flow_matching_loss,
    prepare_batch,
    sample_condition_frames,
    sample_sigma,
    shift_sigma,
)


def synth_cache(root: Path, n: int = 4, seed: int = 0, frames: int | None = None) -> Path:
    """A latent cache in the `avsim train encode` format, random contents, debug-model shapes."""
    mc = debug_model()
    root.mkdir(parents=True, exist_ok=True)
    g = torch.Generator().manual_seed(seed)
    spec = ClipSpec(frames=frames or mc.frames_per_chunk, height_px=mc.height_px, width_px=mc.width_px)
    v, t = len(mc.cameras), spec.latent_frames
    h, w = mc.height_px // 8, mc.width_px // 8
    n_tok, c = mc.dit.text_tokens_per_view, mc.dit.crossattn_proj_in_channels
    save_tensors(root / BLANK_FILE, {"text": torch.randn(n_tok, c, generator=g)})
    names = []
    for i in range(n):
        names.append(f"clip{i}_000.safetensors")
        save_tensors(
            root / names[-1],
            {
                "video": torch.randn(16, v * t, h, w, generator=g),
                "control": torch.randn(16, v * t, h, w, generator=g),
                "text": torch.randn(n_tok, c, generator=g),
            },
        )
    write_index(root, spec, mc.cameras, names, {})
    return root


# ---------------------------------------------------------------------------------------------
# objective


def test_sigma_sampler_distribution() -> None:
    # the high-noise slice (off in the released recipe; tests/test_train_recipe.py checks that)
    cfg = ObjectiveConfig(high_noise_fraction=0.05)
    g = torch.Generator().manual_seed(0)
    sigma32 = sample_sigma(200_000, cfg, g)
    assert sigma32.dtype == torch.float32
    sigma = sigma32.double()
    assert sigma.min() >= 0 and sigma.max() <= 1
    high = (sigma >= 0.98).double().mean()
    # 5 % uniform slice + the shifted logit-normal's own mass above 0.98
    normal = torch.randn(200_000, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    tail = (shift_sigma(torch.sigmoid(normal), 5.0) >= 0.98).double().mean()
    assert abs(high - (0.05 + 0.95 * tail)) < 0.005
    # median of the shifted logit-normal: sigmoid(0) = 0.5 -> 5 * 0.5 / (1 + 4 * 0.5) = 5/6
    body = sigma[sigma < 0.98]
    assert abs(float(shift_sigma(torch.tensor(0.5, dtype=torch.float64), 5.0)) - 5 / 6) < 1e-12
    assert 0.7 < float(body.median()) < 0.85


def test_condition_frames_and_mask() -> None:
    cfg = ObjectiveConfig()
    k = sample_condition_frames(40_000, cfg, torch.Generator().manual_seed(0))
    freq = torch.bincount(k, minlength=3).double() / k.numel()
    assert torch.allclose(freq, torch.tensor([0.5, 0.25, 0.25], dtype=torch.float64), atol=0.01)
    mask = condition_mask(torch.tensor([0, 1, 2, 5]), num_views=2, frames=3)
    assert mask.shape == (4, 1, 6, 1, 1)
    assert mask[:, 0, :, 0, 0].tolist() == [
        [0, 0, 0, 0, 0, 0],
        [1, 0, 0, 1, 0, 0],
        [1, 1, 0, 1, 1, 0],
        [1, 1, 0, 1, 1, 0],  # never every frame: at most T - 1 are clean
    ]


def test_loss_is_velocity_mse_on_generated_frames_only() -> None:
    x0, eps = torch.randn(2, 4, 6, 3, 3), torch.randn(2, 4, 6, 3, 3)
    cond = condition_mask(torch.tensor([1, 0]), num_views=2, frames=3)
    v = eps - x0
    for norm in ("all_elements", "generated_elements"):
        assert float(flow_matching_loss(v, x0, eps, cond, norm)) == 0.0
        v_bad = v + cond * 100.0  # errors only on conditioning frames are ignored
        assert float(flow_matching_loss(v_bad, x0, eps, cond, norm)) == 0.0
    v_off = v + 1.0
    assert abs(float(flow_matching_loss(v_off, x0, eps, cond, "generated_elements")) - 1.0) < 1e-6
    # all elements: sample 0 has 2 of 6 frames clean, sample 1 none -> (4/6 + 1) / 2
    assert abs(float(flow_matching_loss(v_off, x0, eps, cond)) - (4 / 6 + 1) / 2) < 1e-6


def test_prepare_batch_is_independent_of_the_data_parallel_split() -> None:
    x0 = torch.randn(4, 16, 6, 2, 2)
    cfg = ObjectiveConfig()
    whole = prepare_batch(x0, 2, cfg, seed=3, step=7, first_sample=0)
    halves = [prepare_batch(x0[i : i + 2], 2, cfg, seed=3, step=7, first_sample=i) for i in (0, 2)]
    for field in ("x_sigma", "eps", "sigma", "timestep", "cond", "text_keep"):
        joined = torch.cat([getattr(h, field) for h in halves])
        assert torch.equal(getattr(whole, field), joined), field
    s = whole.sigma.view(-1, 1, 1, 1, 1)
    expected = torch.where(whole.cond.bool(), x0, (1 - s) * x0 + s * whole.eps)
    assert torch.equal(whole.x_sigma, expected)
    assert torch.equal(whole.sigma, whole.timestep / 1000)  # t = 1000 sigma, no rounding


# ---------------------------------------------------------------------------------------------
# data


@settings(max_examples=30, deadline=None)
@given(n=st.integers(1, 9), bs=st.integers(1, 3), dp=st.integers(1, 3), start=st.integers(0, 5))
def test_sampler_partitions_the_stream_and_resumes(n: int, bs: int, dp: int, start: int) -> None:
    samplers = [ClipBatchSampler(n, bs, r, dp, seed=1) for r in range(dp)]
    for b in range(3):
        joined = sum((s.batch_indices(b) for s in samplers), [])
        single = ClipBatchSampler(n, bs * dp, 0, 1, seed=1).batch_indices(b)
        assert joined == single  # dp ranks split exactly what one process would see
    it = iter(ClipBatchSampler(n, bs, 0, dp, seed=1, start_batch=start))
    assert next(it) == samplers[0].batch_indices(start)
    epoch = sum((ClipBatchSampler(n, 1, 0, 1, seed=1).batch_indices(b) for b in range(n)), [])
    assert sorted(epoch) == list(range(n))  # one epoch is a permutation


def test_latent_dataset_assembles_multiview_text(tmp_path: Path) -> None:
    root = synth_cache(tmp_path / "cache", n=2)
    ds = LatentClipDataset(root)
    item = ds[1]
    mc = debug_model()
    v, n_tok = len(mc.cameras), mc.dit.text_tokens_per_view
    assert item["video"].shape == (16, v * 2, mc.height_px // 8, mc.width_px // 8)
    assert item["text"].shape == (v * n_tok, mc.dit.crossattn_proj_in_channels)
    from safetensors.torch import load_file

    blank = load_file(root / BLANK_FILE)["text"]
    assert torch.equal(item["text"][:n_tok], load_file(root / "clip1_000.safetensors")["text"])
    assert torch.equal(item["text"][n_tok:], blank.repeat(v - 1, 1))
    batch = collate([ds[0], ds[1]])
    assert batch["video"].shape[0] == 2 and batch["name"] == ["clip0_000.safetensors", "clip1_000.safetensors"]


# ---------------------------------------------------------------------------------------------
# config


def test_config_overrides_and_files(tmp_path: Path) -> None:
    cfg = apply_overrides(
        debug(),
        ["steps=7", "parallel.cp=2", "parallel.activation_checkpointing=selective", "optim.betas=(0.8, 0.9)",
         "objective.condition_frame_probs={\"0\": 1.0}", "parallel.compile=true"],
    )
    assert cfg.steps == 7 and cfg.parallel.cp == 2 and cfg.parallel.activation_checkpointing == "selective"
    assert cfg.optim.betas == (0.8, 0.9) and cfg.objective.condition_frame_probs == {0: 1.0} and cfg.parallel.compile
    with pytest.raises(ValueError, match="no field"):
        apply_overrides(cfg, ["parallel.nope=1"])
    with pytest.raises(ValueError, match="expected one of"):
        apply_overrides(cfg, ["parallel.activation_checkpointing=some"])
    path = tmp_path / "my_run.py"
    path.write_text(
        "from avsim.train.config import debug\n"
        "def config():\n    return debug(cache_dir='c', out_dir='o')\n"
    )
    assert load_config(str(path)).data.cache_dir == "c"
    assert load_config("posttrain_2b").optim.lr == 8.63e-5


# ---------------------------------------------------------------------------------------------
# activation checkpointing


class PeakTensorMemory(TorchDispatchMode):
    """Peak bytes of live tensor storages created while active (activations, grads, temporaries).

    Every op's outputs are recorded with a weak reference to their storage; after each op the
    expired ones are dropped and the sum of the rest is the current footprint. This counts what
    autograd keeps alive between forward and backward, which is what checkpointing trades.
    """

    def __init__(self) -> None:
        super().__init__()
        self.live: dict[int, tuple[StorageWeakRef, int]] = {}
        self.current = self.peak = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # type: ignore[no-untyped-def]
        out = func(*args, **(kwargs or {}))
        for key in [k for k, (ref, _) in self.live.items() if ref.expired()]:
            self.current -= self.live.pop(key)[1]
        for t in tree_flatten(out)[0]:
            if isinstance(t, torch.Tensor) and t.device.type == "cpu":
                storage = t.untyped_storage()
                if storage.data_ptr() not in self.live:
                    self.live[storage.data_ptr()] = (StorageWeakRef(storage), storage.nbytes())
                    self.current += storage.nbytes()
        self.peak = max(self.peak, self.current)
        return out


def _fwd_bwd(mode: str, batch: dict, nb) -> tuple[float, dict[str, torch.Tensor], int]:  # type: ignore[no-untyped-def]
    from avsim.train.loop import build_model, forward_loss, set_trainable
    from avsim.train.parallelize import parallelize

    model = build_model(debug_model(), seed=0)
    set_trainable(model, "full")
    parallelize(model, ParallelConfig(activation_checkpointing=mode), None, torch.device("cpu"))
    assert not any("forward" in vars(m) for m in model.modules())  # declared, nothing patched
    with PeakTensorMemory() as mem:
        loss = forward_loss(model, batch, nb, num_views=7)
        loss.backward()
    grads = {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}
    return float(loss.detach()), grads, mem.peak


@pytest.mark.slow
@pytest.mark.timeout(360)
def test_activation_checkpointing_keeps_losses_and_lowers_peak_memory(tmp_path: Path) -> None:
    ds = LatentClipDataset(synth_cache(tmp_path / "cache", n=1))
    batch = collate([ds[0]])
    cfg = dataclasses.replace(ObjectiveConfig(), text_dropout=0.0)
    nb = prepare_batch(batch["video"], 7, cfg, seed=0, step=3, first_sample=0)
    results = {mode: _fwd_bwd(mode, batch, nb) for mode in ("none", "selective", "full")}
    loss0, grads0, peak0 = results["none"]
    for mode in ("selective", "full"):
        loss, grads, _ = results[mode]
        assert loss == loss0  # recomputation is bit-identical on the CPU
        for name, g in grads0.items():
            assert torch.equal(grads[name], g), name
    peaks = {m: r[2] for m, r in results.items()}
    print("peak tensor memory (MiB):", {m: round(p / 2**20, 2) for m, p in peaks.items()})
    assert peaks["full"] < peaks["selective"] < peaks["none"]
    assert peaks["full"] < 0.75 * peaks["none"]


# ---------------------------------------------------------------------------------------------
# FLOP count (the benchmark's MFU)


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["control", "full"])
def test_hand_flop_count_matches_torch_flop_counter(mode: str) -> None:
    """dit_flops (derived by hand, docs/training.md) against torch's FlopCounterMode on the
    debug model: forward and training (forward + backward, frozen base in control mode)."""
    from torch.nn.attention import SDPBackend, sdpa_kernel
    from torch.utils.flop_counter import FlopCounterMode

    from avsim.train.flops import dit_flops
    from avsim.train.loop import build_model, set_trainable

    mc = debug_model()
    views, frames, h, w = 3, 3, 8, 14
    model = build_model(mc, seed=0)
    set_trainable(model, mode)
    g = torch.Generator().manual_seed(0)
    x = torch.randn(1, 16, views * frames, h, w, generator=g)
    text = torch.randn(1, views * mc.dit.text_tokens_per_view, mc.dit.crossattn_proj_in_channels, generator=g)
    # the math SDPA kernel decomposes into bmm, which the counter sees (the fused CPU kernel not)
    with sdpa_kernel(SDPBackend.MATH):
        with FlopCounterMode(display=False) as fwd:
            out = model(x, torch.tensor([500.0]), text, num_views=views, control_latent=torch.randn_like(x))
        with FlopCounterMode(display=False) as bwd:
            out.square().mean().backward()
    expected = dit_flops(mc.dit, views, frames, h, w)
    counted_fwd = fwd.get_total_flops()
    assert expected.base_forward + expected.control_forward == pytest.approx(counted_fwd, rel=0.01)
    assert expected.training(mode) == pytest.approx(counted_fwd + bwd.get_total_flops(), rel=0.02)
