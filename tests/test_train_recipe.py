"""The `posttrain_2b` recipe against restatements of cosmos-transfer2.5's multi-view training.

Each reference below is written from the formula in the official code (paths in
docs/training.md, "Recipe"), not from avsim's implementation: the sigma sampler's exact
quantiles, the training step's loss, the LambdaLinear learning-rate schedule and the power EMA.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest
import torch

from avsim.train.config import posttrain_2b
from avsim.train.ema import EMA, EMAConfig, power_exponent
from avsim.train.objective import (
    ObjectiveConfig,
    condition_mask,
    flow_matching_loss,
    prepare_batch,
    sample_generator,
    sample_sigma,
    sample_sigma_and_timestep,
)
from avsim.train.schedule import lr_at

LEGACY_SIGMA = dict(high_noise_fraction=0.05, timesteps="floor")  # avsim before issue 16


def _official_sigma_cdf(sigma: torch.Tensor, shift: float = 5.0) -> torch.Tensor:
    """P(sigma' <= s) for sigma' = shift u / (1 + (shift - 1) u), u = sigmoid(z), z ~ N(0, 1)."""
    u = sigma / (shift - (shift - 1) * sigma)  # the shift's inverse
    return torch.special.ndtr(torch.logit(u))


def _official_sigma_quantile(p: torch.Tensor, shift: float = 5.0) -> torch.Tensor:
    u = torch.sigmoid(torch.special.ndtri(p))
    return shift * u / (1 + (shift - 1) * u)


def test_posttrain_2b_is_the_official_multiview_recipe() -> None:
    cfg = posttrain_2b()
    o, opt, ema = cfg.objective, cfg.optim, cfg.ema
    assert (o.sigma_shift, o.logit_mean, o.logit_std, o.high_noise_fraction) == (5.0, 0.0, 1.0, 0.0)
    assert (o.timesteps, o.loss_normalization, o.text_dropout) == ("continuous", "all_elements", 0.2)
    assert o.condition_frame_probs == {0: 0.5, 1: 0.25, 2: 0.25}
    assert (opt.lr, opt.weight_decay, opt.betas, opt.eps, opt.grad_clip) == (8.63e-5, 1e-3, (0.9, 0.999), 1e-8, 0.1)
    assert (opt.schedule, opt.warmup_steps, opt.cycle_steps) == ("lambda_linear", 1000, 100_000)
    assert (opt.lr_start_factor, opt.lr_max_factor, opt.lr_min_factor) == (1e-6, 0.5, 0.2)
    assert (ema.kind, ema.sigma_rel, ema.iteration_shift) == ("power", 0.10, 0)
    assert cfg.train_mode == "control"


# ---------------------------------------------------------------------------------------------
# sigma and timesteps


def test_sigma_distribution_matches_the_reference_sampler() -> None:
    n = 100_000
    sigma = sample_sigma(n, ObjectiveConfig(), torch.Generator().manual_seed(0)).double()
    p = torch.tensor([0.001, 0.01, 0.05, 0.1, 0.25, 0.5, 0.75, 0.9, 0.95, 0.99, 0.999], dtype=torch.float64)
    ref_q = _official_sigma_quantile(p)
    # empirical quantiles sit within the DKW band (4 binomial sigmas in probability) of the exact ones
    band = 4 * torch.sqrt(p * (1 - p) / n)
    assert ((_official_sigma_cdf(torch.quantile(sigma, p)) - p).abs() <= band).all(), (torch.quantile(sigma, p), ref_q)
    ks = (torch.arange(1, n + 1, dtype=torch.float64) / n - _official_sigma_cdf(sigma.sort().values)).abs().max()
    assert ks < 0.006  # P(KS > 0.006) < 2 exp(-2 n 0.006^2) = 1.5e-3
    tail = 1 - float(_official_sigma_cdf(torch.tensor(0.98, dtype=torch.float64)))  # 0.0112
    assert abs(float((sigma >= 0.98).double().mean()) - tail) < 0.0015
    legacy = sample_sigma(n, ObjectiveConfig(**LEGACY_SIGMA), torch.Generator().manual_seed(0)).double()
    assert abs(float((legacy >= 0.98).double().mean()) - (0.05 + 0.95 * tail)) < 0.003  # the old 0.061


def test_earlier_sampler_is_kept_bit_for_bit() -> None:
    """The options of avsim's earlier sampler reproduce its draws exactly (restated here)."""
    g_new, g_old = torch.Generator().manual_seed(7), torch.Generator().manual_seed(7)
    sigma, t = sample_sigma_and_timestep(1000, ObjectiveConfig(**LEGACY_SIGMA), g_new)
    z = torch.randn(1000, generator=g_old, dtype=torch.float64)
    body = 5 * torch.sigmoid(z) / (1 + 4 * torch.sigmoid(z))
    uniform = 0.98 + 0.02 * torch.rand(1000, generator=g_old, dtype=torch.float64)
    old = torch.where(torch.rand(1000, generator=g_old, dtype=torch.float64) < 0.05, uniform, body).float()
    assert torch.equal(sigma, old) and torch.equal(t, (old.double() * 1000).floor().float())


def test_training_batches_draw_from_the_same_distribution() -> None:
    """prepare_batch's per-sample generators feed the same sampler (first draws of each)."""
    cfg = ObjectiveConfig()
    x0 = torch.zeros(6, 16, 4, 1, 1)
    nb = prepare_batch(x0, 2, cfg, seed=1, step=3, first_sample=10)
    for i in range(6):
        sigma, t = sample_sigma_and_timestep(1, cfg, sample_generator(1, 3, 10 + i))
        assert torch.equal(nb.sigma[i : i + 1], sigma) and torch.equal(nb.timestep[i : i + 1], t)


def test_timestep_modes() -> None:
    n = 20_000
    sigma, t = sample_sigma_and_timestep(n, ObjectiveConfig(), torch.Generator().manual_seed(2))
    # the reference: t = float32(1000 sigma_raw), sigma = t / 1000 in float32, no rounding
    assert torch.equal(sigma, t / 1000) and sigma.dtype == t.dtype == torch.float32
    assert float((t != t.floor()).double().mean()) > 0.99
    s_floor, t_floor = sample_sigma_and_timestep(n, ObjectiveConfig(timesteps="floor"), torch.Generator().manual_seed(2))
    assert torch.equal(t, s_floor * 1000)  # same draws, only the map differs
    assert torch.equal(t_floor, torch.floor(s_floor.double() * 1000).float())
    # initial release: sigma on the scheduler grid shift(k / 1000), k = 1..1000 (float32), t = 1000 sigma
    s_grid, t_grid = sample_sigma_and_timestep(n, ObjectiveConfig(timesteps="grid"), torch.Generator().manual_seed(2))
    base = torch.from_numpy(np.linspace(1, 1000, 1000, dtype=np.float32)[::-1] / 1000)
    grid = 5 * base / (1 + 4 * base)
    assert torch.isin(s_grid, grid).all() and torch.equal(t_grid, s_grid * 1000)
    cdf = _official_sigma_cdf(s_grid.sort().values.double())
    i = torch.arange(1, n + 1, dtype=torch.float64)
    ks = torch.maximum((i / n - cdf).abs(), ((i - 1) / n - cdf).abs()).max()
    assert ks < 0.015  # a discretisation of the same distribution (one grid cell holds < 0.002)


# ---------------------------------------------------------------------------------------------
# loss


def _official_loss(v_net: torch.Tensor, x0: torch.Tensor, eps: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """training_step_multiview: prediction replaced by eps - x0 on conditioning frames, mean MSE."""
    v = (eps - x0) * mask + v_net * (1 - mask)
    per_instance = torch.mean((v - (eps - x0)) ** 2, dim=list(range(1, v.dim())))
    return torch.mean(torch.ones_like(per_instance) * per_instance)


def test_loss_normalisation_with_conditioning_frames() -> None:
    g = torch.Generator().manual_seed(0)
    x0, eps, v = (torch.randn(3, 4, 6, 2, 3, generator=g) for _ in range(3))
    k = torch.tensor([0, 1, 2])
    cond = condition_mask(k, num_views=2, frames=3)
    mask = cond.expand_as(x0)
    ref = _official_loss(v, x0, eps, mask)
    torch.testing.assert_close(flow_matching_loss(v, x0, eps, cond), ref, rtol=1e-6, atol=0)
    # the earlier normalisation weighted sample i by T / (T - k_i)
    per = [float(flow_matching_loss(v[i : i + 1], x0[i : i + 1], eps[i : i + 1], cond[i : i + 1])) for i in range(3)]
    old = [float(flow_matching_loss(v[i : i + 1], x0[i : i + 1], eps[i : i + 1], cond[i : i + 1], "generated_elements"))
           for i in range(3)]
    for i in range(3):
        assert old[i] == pytest.approx(per[i] * 3 / (3 - int(k[i])), rel=1e-6)


def test_training_step_loss_matches_the_reference_step() -> None:
    """Same batch, seed and config: avsim's forward_loss vs the reference step restated."""
    from avsim.models.config import debug as debug_model
    from avsim.train.loop import build_model, forward_loss

    mc = debug_model()
    model = build_model(mc, seed=0)
    g = torch.Generator().manual_seed(4)
    views, frames, h, w = 2, 2, 4, 6
    x0 = torch.randn(2, 16, views * frames, h, w, generator=g)
    text = torch.randn(2, views * mc.dit.text_tokens_per_view, mc.dit.crossattn_proj_in_channels, generator=g)
    batch = {"text": text, "control": torch.randn(x0.shape, generator=g)}
    cfg = dataclasses.replace(ObjectiveConfig(), text_dropout=0.0, condition_frame_probs={1: 1.0})
    nb = prepare_batch(x0, views, cfg, seed=0, step=5, first_sample=0)
    with torch.no_grad():
        got = forward_loss(model, batch, nb, views)
        mask = nb.cond.expand_as(x0)
        s = nb.sigma.view(-1, 1, 1, 1, 1)
        xt = nb.eps * s + x0 * (1 - s)  # get_interpolation(eps, x0, sigma)
        xt = x0 * mask + xt * (1 - mask)  # denoise: conditioning frames clean
        v = model(xt, nb.timestep, text, condition_mask=nb.cond.expand(2, 1, views * frames, h, w),
                  num_views=views, control_latent=batch["control"])
        ref = _official_loss(v, x0, nb.eps, mask)
    torch.testing.assert_close(got, ref, rtol=1e-6, atol=0)


# ---------------------------------------------------------------------------------------------
# learning rate


def _lambda_linear(n: int, warm: int = 1000, cycle: int = 100_000, f_start: float = 1e-6,
                   f_max: float = 0.5, f_min: float = 0.2) -> float:
    """LambdaLinearScheduler.schedule (one cycle), lr_scheduler.py of the reference."""
    if n < warm:
        return (f_max - f_start) / warm * n + f_start
    return f_min + (f_max - f_min) * (cycle - n) / (cycle - warm)


def test_lr_schedule_is_the_reference_lambda_linear() -> None:
    optim = posttrain_2b().optim
    for n in (0, 1, 2, 499, 999, 1000, 1001, 5000, 50_000, 99_999, 100_000):
        assert lr_at(n, optim) == 8.63e-5 * _lambda_linear(n), n
    assert lr_at(0, optim) == pytest.approx(8.63e-11)
    assert lr_at(1000, optim) == pytest.approx(8.63e-5 * 0.5, rel=1e-15)
    assert lr_at(100_000, optim) == pytest.approx(8.63e-5 * 0.2, rel=1e-15)
    assert lr_at(250_000, optim) == lr_at(100_000, optim)  # past the cycle: held at f_min
    # driven as the reference does: LambdaLR, scheduler.step() after every optimizer.step()
    p = torch.nn.Parameter(torch.zeros(1))
    opt = torch.optim.AdamW([p], lr=8.63e-5)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lr_lambda=_lambda_linear)
    for n in range(1100):
        assert opt.param_groups[0]["lr"] == lr_at(n, optim), n
        opt.step()
        sched.step()
    legacy = dataclasses.replace(optim, schedule="warmup_constant")
    assert [lr_at(n, legacy) for n in (0, 999, 5000)] == pytest.approx([8.63e-5 / 1000, 8.63e-5, 8.63e-5], rel=1e-15)


# ---------------------------------------------------------------------------------------------
# EMA


def test_power_ema_exponent_and_decays() -> None:
    gamma = power_exponent(0.10)
    # EDM2: sigma_rel = sqrt((g + 1) / ((g + 2)^2 (g + 3)))
    assert math.sqrt((gamma + 1) / ((gamma + 2) ** 2 * (gamma + 3))) == pytest.approx(0.10, rel=1e-12)
    assert gamma == pytest.approx(6.9372039376, rel=1e-9)
    ema = EMA(torch.nn.Linear(1, 1), posttrain_2b().ema)
    assert ema.beta(0) == 0.0  # the first update copies the weights
    for i in (1, 2, 10, 1000, 99_999):
        assert ema.beta(i) == (1 - 1 / (i + 1)) ** (gamma + 1), i
    legacy = EMA(torch.nn.Linear(1, 1), EMAConfig(kind="constant"))
    assert [legacy.beta(i) for i in (0, 100_000)] == [0.1, 0.9999]


def test_power_ema_is_the_power_profile_average() -> None:
    """After steps 0..n the EMA weights step j by ((j+1)^(g+1) - j^(g+1)) / (n+1)^(g+1)."""
    n = 400
    model = torch.nn.Linear(1, 1, bias=False)
    ema = EMA(model, EMAConfig())
    values = torch.randn(n + 1, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    for v in values:
        model.weight.data.fill_(float(v))
        ema.update(model)
    g1 = power_exponent(0.10) + 1
    j = torch.arange(n + 1, dtype=torch.float64)
    weights = ((j + 1) ** g1 - j**g1) / (n + 1) ** g1
    assert float(weights.sum()) == pytest.approx(1.0, rel=1e-12)
    assert float(ema.shadow["weight"]) == pytest.approx(float((weights * values.float().double()).sum()), abs=1e-5)
    # the window grows with the run: the profile's std is sigma_rel of its length
    big = torch.arange(1_000_000, dtype=torch.float64)
    w = ((big + 1) ** g1 - big**g1) / 1_000_000**g1
    mean = (w * big).sum()
    assert float(((w * (big - mean) ** 2).sum()).sqrt() / 1_000_000) == pytest.approx(0.10, rel=1e-4)


def test_power_ema_update_is_the_reference_foreach_form() -> None:
    model = torch.nn.Linear(3, 2)
    ema = EMA(model, EMAConfig())
    ref = [p.detach().float().clone() for p in model.parameters()]
    g = torch.Generator().manual_seed(1)
    for step in range(5):
        with torch.no_grad():
            for p in model.parameters():
                p.add_(torch.randn(p.shape, generator=g))
        beta = 0.0 if step < 1 else (1 - 1 / (step + 1)) ** (power_exponent(0.1) + 1)
        torch._foreach_mul_(ref, beta)
        torch._foreach_add_(ref, [p.detach() for p in model.parameters()], alpha=1.0 - beta)
        ema.update(model)
    for name, r in zip(("weight", "bias"), ref, strict=True):
        assert torch.equal(ema.shadow[name], r)
