"""Moving average of the trained weights: the power-function EMA of the released recipe.

Works on whatever the parameters are: plain tensors or FSDP2 DTensor shards (each rank then
averages only its shard, and torch.distributed.checkpoint saves the shards). The average is
kept in fp32 whatever the parameter dtype. Its state is the shadow weights and the number of
updates done (`step`); the decay of the next update is a function of that count only, so a
resumed run continues bit for bit.

Power EMA (Karras et al., "Analyzing and Improving the Training Dynamics of Diffusion Models",
EDM2, section 3.1): after the update of (0-based) step i the average weights the parameters
after step j by ``((j + 1)^(g + 1) - j^(g + 1)) / (i + 1)^(g + 1)``, i.e. a profile growing like
j^g: the averaging window grows with the run. It is the recursion
``ema = beta_i ema + (1 - beta_i) param`` with ``beta_i = (1 - 1/(i + 1))^(g + 1)`` (beta_0 = 0:
the first update copies the weights). The exponent g follows from the relative width
sigma_rel of that profile: sigma_rel^2 = (g + 1) / ((g + 2)^2 (g + 3)), which is the cubic
g^3 + 7 g^2 + (16 - sigma_rel^-2) g + (12 - sigma_rel^-2) = 0 (its largest real root).
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal

import numpy as np
import torch
from torch import nn


@dataclass(frozen=True)
class EMAConfig:
    """How the exported (EMA) weights average the trained ones.

    ``kind``: ``power`` (the released recipe) or ``constant`` (avsim's earlier fixed decay);
    ``sigma_rel``: relative width of the power profile (power only);
    ``iteration_shift``: added to the step count before the power decay is computed;
    ``decay``: per-step decay of ``constant``, warm-started as ``min(decay, (1 + i) / (10 + i))``.
    """

    # power EMA, sigma_rel 0.10: value from cosmos-transfer2.5
    # cosmos_transfer2/_src/predict2/configs/common/defaults/ema.py (PowerEMAConfig, rate=0.10,
    # iteration_shift=0), the `ema: power` default of
    # cosmos_transfer2/_src/transfer2_multiview/configs/vid2vid_transfer/config.py
    kind: Literal["power", "constant"] = "power"
    sigma_rel: float = 0.10
    iteration_shift: int = 0
    decay: float = 0.9999

    def __post_init__(self) -> None:
        if self.kind not in ("power", "constant"):
            raise ValueError(f"ema kind must be power or constant, got {self.kind!r}")
        if not 0.0 < self.sigma_rel < 1.0 / math.sqrt(12.0):  # g -> 0 gives 1/sqrt(12) (uniform)
            raise ValueError(f"sigma_rel must be in (0, {1 / math.sqrt(12):.4f}), got {self.sigma_rel}")
        if not 0.0 <= self.decay < 1.0:
            raise ValueError(f"decay must be in [0, 1), got {self.decay}")
        if self.iteration_shift < 0:
            raise ValueError(f"iteration_shift must be >= 0, got {self.iteration_shift}")


def power_exponent(sigma_rel: float) -> float:
    """The exponent g of the power profile whose relative width is `sigma_rel` (EDM2 eq. 3).

    Args:
        sigma_rel: relative standard deviation of the averaging profile, in (0, 1/sqrt(12)).

    Returns:
        g (a float; 6.937... for 0.10).
    """
    inv_sq = sigma_rel**-2
    roots = np.roots([1.0, 7.0, 16.0 - inv_sq, 12.0 - inv_sq])
    return float(roots.real.max())


class EMA:
    """Moving average of the parameters with ``requires_grad`` (the frozen base needs none).

    Call `update` after every optimiser step; `beta(i)` is the decay used by the update of
    step i (0-based), which is `self.step` at the time of the call.
    """

    def __init__(self, model: nn.Module, config: EMAConfig | None = None) -> None:
        self.config = config or EMAConfig()
        self.exponent = power_exponent(self.config.sigma_rel)
        self.step = 0
        self.shadow: dict[str, torch.Tensor] = {
            name: p.detach().float().clone() for name, p in self._trained(model)
        }

    @staticmethod
    def _trained(model: nn.Module) -> Iterable[tuple[str, nn.Parameter]]:
        return ((n, p) for n, p in model.named_parameters() if p.requires_grad)

    def beta(self, step: int) -> float:
        """Decay of the update after (0-based) optimiser step `step`."""
        cfg = self.config
        if cfg.kind == "constant":
            return min(cfg.decay, (1.0 + step) / (10.0 + step))
        # beta_i = (1 - 1/(i+1))^(g+1), 0 before the first step: formula of cosmos-transfer2.5
        # cosmos_transfer2/_src/predict2/models/text2world_model_rectified_flow.py (ema_beta),
        # called with the trainer's 0-based iteration (cosmos_transfer2/_src/imaginaire/trainer.py)
        i = step + cfg.iteration_shift
        return 0.0 if i < 1 else (1.0 - 1.0 / (i + 1)) ** (self.exponent + 1.0)

    def current_decay(self) -> float:
        return self.beta(self.step)

    @torch.no_grad()
    def update(self, model: nn.Module) -> None:
        d = self.current_decay()
        for name, p in self._trained(model):
            if self.config.kind == "constant":  # avsim's earlier update, kept bit for bit
                self.shadow[name].lerp_(p.detach().float(), 1.0 - d)
            else:  # ema * beta + (1 - beta) * param, in that order (the reference's form)
                self.shadow[name].mul_(d).add_(p.detach().float(), alpha=1.0 - d)
        self.step += 1

    @torch.no_grad()
    def copy_to(self, model: nn.Module) -> None:
        """Write the averages into the model's parameters (cast to their dtype)."""
        params = dict(self._trained(model))
        for name, value in self.shadow.items():
            params[name].copy_(value.to(params[name].dtype))

    def state_dict(self) -> dict[str, torch.Tensor]:
        """Tensors only (the step as a 0-d tensor), so DCP can shard and reshard it."""
        return {**{f"shadow.{k}": v for k, v in self.shadow.items()}, "step": torch.tensor(self.step)}

    def load_state_dict(self, state: dict[str, torch.Tensor]) -> None:
        for k in self.shadow:
            self.shadow[k].copy_(state[f"shadow.{k}"])
        self.step = int(state["step"])


__all__ = ["EMA", "EMAConfig", "power_exponent"]
