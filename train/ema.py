"""Exponential moving average of the trained weights.

Works on whatever the parameters are: plain tensors or FSDP2 DTensor shards (each rank then
averages only its shard, and torch.distributed.checkpoint saves the shards). The average is
kept in fp32 whatever the parameter dtype.
"""

from __future__ import annotations

from collections.abc import Iterable

import torch
from torch import nn


class EMA:
    """``ema = decay * ema + (1 - decay) * param`` after every optimiser step.

    ``decay``: per-step decay (0.9999 ~ a 10k-step horizon); early steps use
    ``min(decay, (1 + step) / (10 + step))`` so the average is not dominated by the init.
    Only parameters with ``requires_grad`` are tracked (the frozen base needs no average).
    """

    def __init__(self, model: nn.Module, decay: float = 0.9999) -> None:
        if not 0.0 <= decay < 1.0:
            raise ValueError(f"decay must be in [0, 1), got {decay}")
        self.decay = decay
        self.step = 0
        self.shadow: dict[str, torch.Tensor] = {
            name: p.detach().float().clone() for name, p in self._trained(model)
        }

    @staticmethod
    def _trained(model: nn.Module) -> Iterable[tuple[str, nn.Parameter]]:
        return ((n, p) for n, p in model.named_parameters() if p.requires_grad)

    def current_decay(self) -> float:
        return min(self.decay, (1.0 + self.step) / (10.0 + self.step))

    @torch.no_grad()
    def update(self, model: nn.Module) -> None:
        d = self.current_decay()
        for name, p in self._trained(model):
            self.shadow[name].lerp_(p.detach().float(), 1.0 - d)
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
