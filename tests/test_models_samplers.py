"""Samplers on an analytic rectified flow (Gaussian data, exact velocity), grid and timesteps."""

from __future__ import annotations

import ast
import inspect
import itertools
import math

import numpy as np
import pytest
import torch

from avsim.models import samplers
from avsim.models.samplers import (
    cfg_combine,
    chunk_starts,
    conditioned_velocity,
    euler_sample,
    guided_velocity,
    pixel_to_latent_frames,
    sigma_grid,
    timesteps_of,
    unipc_sample,
)

MU, STD = 1.5, 0.5  # data x0 ~ N(MU, STD^2) per element


def exact_velocity(x: torch.Tensor, sigma: float, t: int) -> torch.Tensor:
    """E[eps - x0 | x_sigma] for x_sigma = (1 - sigma) x0 + sigma eps."""
    a = 1.0 - sigma
    var = a * a * STD * STD + sigma * sigma
    r = x - a * MU
    e_eps = sigma / var * r
    e_x0 = MU + a * STD * STD / var * r
    return e_eps - e_x0


def _start_and_endpoint(sigma0: float, n: int = 4096):
    z = torch.randn(n, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    a = 1.0 - sigma0
    x = a * MU + math.sqrt(a * a * STD * STD + sigma0 * sigma0) * z
    return x, MU + STD * z  # the probability-flow ODE keeps the standardised coordinate


def _error(sample_fn, steps: int) -> float:
    sig = sigma_grid(steps)
    x, target = _start_and_endpoint(float(sig[0]))
    out = sample_fn(exact_velocity, x, sig)
    return float((out - target).abs().max())


def _reference_grid(n: int, shift: float = 5.0) -> tuple[np.ndarray, list[int]]:
    """FlowUniPCMultistepScheduler.set_timesteps of cosmos-transfer2.5 (fm_solvers_unipc.py),
    restated: sigma_max is 0.999 read back from its float32 training sigmas, the grid is
    linspace(sigma_max, 0, N + 1)[:-1] in float64, shifted, then stored as float32 with a final
    0; the timesteps are int64(1000 sigma) of the float64 sigmas."""
    base = np.linspace(float(np.float32(0.999)), 0.0, n + 1)[:-1]
    shifted = shift * base / (1 + (shift - 1) * base)
    return np.concatenate([shifted, [0.0]]).astype(np.float32), (shifted * 1000).astype(np.int64).tolist()


def test_sigma_grid_and_integer_timesteps():
    for n in range(1, 101):
        sig, ts = _reference_grid(n)
        assert np.array_equal(sigma_grid(n).numpy(), sig), n
        assert timesteps_of(sigma_grid(n)[:-1]) == ts, n  # the float32 grid gives the same integers
    sig = sigma_grid(35)
    assert sig.dtype == torch.float32 and sig.shape == (36,)
    old = np.append(5 * (b := np.linspace(0.999, 0, 36)[:35]) / (1 + 4 * b), 0.0).astype(np.float32)
    assert np.abs(sig.numpy().astype(np.float64) - old).max() <= 2**-24  # the float64-0.999 grid: one ulp
    assert sig[-1] == 0 and bool((sig[:-1] > sig[1:]).all())
    assert sig[0].item() == pytest.approx(5 * 0.999 / (1 + 4 * 0.999), rel=1e-7)
    ts = timesteps_of(sig)
    assert ts[0] == 999 and ts[-1] == 0
    assert all(isinstance(t, int) for t in ts)
    assert ts == [math.floor(1000 * float(s)) for s in sig]  # truncation, not rounding


@pytest.mark.parametrize("method", [unipc_sample, euler_sample])
def test_both_samplers_converge_to_the_known_endpoint(method):
    errors = [_error(method, n) for n in (8, 16, 35, 70, 140)]
    assert errors[-1] < 0.06 and errors[-1] < errors[0] / 10
    assert all(a > b for a, b in itertools.pairwise(errors))


def test_unipc_beats_euler_at_35_steps():
    e_unipc, e_euler = _error(unipc_sample, 35), _error(euler_sample, 35)
    assert e_unipc < e_euler / 5, (e_unipc, e_euler)
    # second order: halving the step size shrinks the error much faster than Euler's
    ratio_unipc = _error(unipc_sample, 16) / _error(unipc_sample, 32)
    ratio_euler = _error(euler_sample, 16) / _error(euler_sample, 32)
    assert ratio_unipc > 3.0 > ratio_euler > 1.5


def test_unipc_last_step_returns_the_x0_prediction():
    sig = sigma_grid(3)
    seen = []

    def velocity(x, sigma, t):
        seen.append((sigma, t))
        return torch.full_like(x, 2.0)

    out = unipc_sample(velocity, torch.zeros(3, dtype=torch.float64), sig)
    assert len(seen) == 3 and [t for _, t in seen] == timesteps_of(sig)[:3]
    # with v constant every x0 prediction is x - sigma v; the output is the last one exactly
    assert out.shape == (3,) and torch.isfinite(out).all()


def test_euler_step_rule():
    sig = sigma_grid(2)
    out = euler_sample(lambda x, s, t: torch.ones_like(x), torch.zeros(2), sig)
    assert torch.allclose(out, torch.full((2,), float(sig[-1] - sig[0])))


def test_cfg_and_conditioning_frames():
    vc, vu = torch.tensor([1.0, 2.0]), torch.tensor([0.5, 3.0])
    assert torch.equal(cfg_combine(vc, vu, 3.0), vc + 3.0 * (vc - vu))
    assert guided_velocity(lambda x, s, t: x, None, 3.0)(torch.ones(1), 0.5, 500).item() == 1.0

    clean = torch.full((1, 1, 4, 1, 1), 7.0)
    noise = torch.full((1, 1, 4, 1, 1), 2.0)
    mask = torch.tensor([1.0, 0.0, 1.0, 0.0]).view(1, 1, 4, 1, 1)
    inputs = []

    def net(x, s, t):
        inputs.append(x.clone())
        return torch.zeros_like(x)

    v = conditioned_velocity(net, clean, noise, mask)(torch.zeros(1, 1, 4, 1, 1), 0.5, 500)
    assert inputs[0].flatten().tolist() == [7.0, 0.0, 7.0, 0.0]
    assert v.flatten().tolist() == [-5.0, 0.0, -5.0, 0.0]  # eps - x0_gt on conditioning frames


def test_conditioned_flow_keeps_conditioning_frames_exact():
    sig = sigma_grid(10)
    x0 = torch.tensor([3.0, -1.0], dtype=torch.float64)
    eps = torch.tensor([0.5, 0.2], dtype=torch.float64)
    mask = torch.tensor([1.0, 0.0], dtype=torch.float64)
    x = (1 - float(sig[0])) * x0 + float(sig[0]) * eps
    vel = conditioned_velocity(lambda x, s, t: torch.zeros_like(x), x0, eps, mask)
    for fn in (unipc_sample, euler_sample):
        assert fn(vel, x, sig)[0].item() == pytest.approx(3.0, abs=1e-9)


def test_frame_bookkeeping():
    assert [pixel_to_latent_frames(n) for n in (0, 1, 5, 9, 29)] == [0, 1, 2, 3, 8]
    assert chunk_starts(29, 29, 1) == [0]
    assert chunk_starts(57, 29, 1) == [0, 28]
    assert chunk_starts(100, 29, 5, num_chunks=3) == [0, 24, 48]
    with pytest.raises(ValueError, match="hold 1 chunk"):
        chunk_starts(40, 29, 1, num_chunks=2)


def test_samplers_module_imports_no_model_code():
    """Only the flow-matching convention and the sampler names, never a network."""
    tree = ast.parse(inspect.getsource(samplers))
    imported = {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)} | {
        a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names
    }
    allowed = {"avsim.models.flow", "avsim.models.defaults"}
    assert not any(m and m.startswith("avsim") and m not in allowed for m in imported), imported


def test_sampler_table_matches_the_defaults():
    from avsim.models.defaults import GENERATION, SAMPLER_NAMES
    from avsim.models.pipeline import SamplingOptions

    assert tuple(samplers.SAMPLERS) == SAMPLER_NAMES and GENERATION.sampler in SAMPLER_NAMES
    opts = SamplingOptions()
    assert (opts.steps, opts.guidance, opts.shift, opts.sampler) == (
        GENERATION.steps, GENERATION.guidance, GENERATION.shift, GENERATION.sampler)
    with pytest.raises(ValueError, match="unknown sampler"):
        samplers.sample("ddim", lambda x, s, t: x, torch.zeros(1), sigma_grid(2))


def test_sampler_and_training_share_the_flow_convention():
    from avsim.models import flow
    from avsim.train import objective

    assert samplers.timestep_of is flow.timestep_of and objective.shift_sigma is flow.shift_sigma
    sig = sigma_grid(35)
    assert torch.equal(objective.timestep_of_sigma(sig), torch.tensor(timesteps_of(sig), dtype=torch.float32))
    base = torch.linspace(0.0, 1.0, 11, dtype=torch.float64)
    shifted = flow.shift_sigma(base, 5.0)
    assert torch.equal(shifted, torch.from_numpy(flow.shift_sigma(base.numpy(), 5.0)))
    assert float(shifted[0]) == 0.0 and float(shifted[-1]) == 1.0


def test_unipc_matches_an_independent_reference():
    """Golden values from diffusers 0.42.1 `UniPCMultistepScheduler` (flow_prediction, bh2,
    order 2, lower_order_final, final sigma 0) stepped on this module's 6-step grid with the
    exact Gaussian velocity; recorded once, diffusers is not a dependency."""
    x = torch.tensor([-2.0, -0.5, 0.3, 1.7], dtype=torch.float64)
    out = unipc_sample(exact_velocity, x, sigma_grid(6))
    golden = torch.tensor([1.0603189608181065, 1.3900302458264788, 1.5658762644976107, 1.8736067971720916], dtype=torch.float64)
    torch.testing.assert_close(out, golden, rtol=0, atol=1e-12)
