"""Process-group setup, device meshes and a local multi-process launcher.

Rank layout: ``world = dp_replicate x dp_shard x cp`` with cp fastest, so a CP group is a run
of consecutive ranks (on one node for cp <= GPUs per node, where the all-to-alls are cheapest).
FSDP shards over ``dp_shard x cp`` (the CP ranks hold the same weights, so they share the
shards, as in torchtitan) and replicates over ``dp_replicate`` (HSDP across nodes).
"""

from __future__ import annotations

import os
import socket
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
import torch.distributed as dist
from torch.distributed.device_mesh import DeviceMesh, init_device_mesh


@dataclass(frozen=True)
class WorldInfo:
    rank: int
    world_size: int
    local_rank: int
    device: torch.device


def init_distributed(backend: str | None = None) -> WorldInfo:
    """Join (or create) the default process group from torchrun's environment variables.

    A plain ``python -m avsim.train`` (no RANK in the environment) runs as a world of one.
    ``backend``: nccl on CUDA, gloo otherwise, unless given.
    """
    rank = int(os.environ.get("RANK", 0))
    world_size = int(os.environ.get("WORLD_SIZE", 1))
    local_rank = int(os.environ.get("LOCAL_RANK", 0))
    use_cuda = torch.cuda.is_available() and backend != "gloo"
    device = torch.device("cuda", local_rank) if use_cuda else torch.device("cpu")
    if use_cuda:
        torch.cuda.set_device(device)
    if not dist.is_initialized():
        os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
        if world_size == 1:
            os.environ.setdefault("MASTER_PORT", str(free_port()))
        dist.init_process_group(
            backend=backend or ("nccl" if use_cuda else "gloo"),
            rank=rank,
            world_size=world_size,
            device_id=device if use_cuda else None,
        )
    return WorldInfo(rank, world_size, local_rank, device)


@dataclass(frozen=True)
class Meshes:
    """The meshes and groups training needs.

    ``fsdp``: 2-D (dp_replicate, dp_shard_cp) mesh for `fully_shard`; ``cp_group``: this rank's
    context-parallel group; ``dp_rank`` / ``dp_size``: index and count of distinct data
    batches (CP ranks of one group read the same batch).
    """

    fsdp: DeviceMesh
    cp_group: dist.ProcessGroup
    cp_size: int
    dp_rank: int
    dp_size: int


def build_meshes(device_type: str, dp_replicate: int, cp: int) -> Meshes:
    """Build the FSDP mesh and the CP groups; dp_shard = world / (dp_replicate * cp)."""
    world = dist.get_world_size()
    if world % (dp_replicate * cp):
        raise ValueError(f"world size {world} is not divisible by dp_replicate {dp_replicate} x cp {cp}")
    dp_shard = world // (dp_replicate * cp)
    full = init_device_mesh(
        device_type, (dp_replicate, dp_shard, cp), mesh_dim_names=("dp_replicate", "dp_shard", "cp")
    )
    fsdp = DeviceMesh(
        device_type,
        torch.arange(world).reshape(dp_replicate, dp_shard * cp),
        mesh_dim_names=("dp_replicate", "dp_shard_cp"),
    )
    rank = dist.get_rank()
    return Meshes(
        fsdp=fsdp,
        cp_group=full.get_group("cp"),
        cp_size=cp,
        dp_rank=rank // cp,
        dp_size=dp_replicate * dp_shard,
    )


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _spawn_entry(local_rank: int, world_size: int, port: int, fn: Callable[..., Any], args: tuple) -> None:
    os.environ.update(
        RANK=str(local_rank),
        LOCAL_RANK=str(local_rank),
        WORLD_SIZE=str(world_size),
        MASTER_ADDR="127.0.0.1",
        MASTER_PORT=str(port),
    )
    torch.set_num_threads(1)  # N processes on a few cores: oversubscription costs more than it gives
    init_distributed(backend="gloo")
    try:
        fn(*args)
    finally:
        dist.destroy_process_group()


def launch_local(fn: Callable[..., Any], nprocs: int, *args: Any) -> None:
    """Run ``fn(*args)`` in `nprocs` fresh CPU processes joined by a gloo process group.

    The same thing torchrun does on one node, without the elastic agent; for tests and laptops.
    `fn` must be importable (defined at module top level).
    """
    import torch.multiprocessing as mp

    mp.start_processes(
        _spawn_entry, args=(nprocs, free_port(), fn, args), nprocs=nprocs, join=True, start_method="spawn"
    )
