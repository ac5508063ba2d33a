"""End to end on the CPU with the debug model: `avsim sample` -> `avsim render` (control videos)
-> `avsim train pair` (with camera videos) -> encode -> 20 training steps -> export ->
`avsim generate` with the exported weights.

No real camera recordings of the sample scenario exist, so the "real" videos are synthetic
(moving colour gradients): the point is the data path, shapes and file formats, not what the
model learns.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch

from avsim.cli import main as avsim_main
from avsim.core.rig import COSMOS_VIEW_NAMES
from avsim.core.video import MP4Writer
from avsim.models.config import debug as debug_model

FRAMES_30FPS = 13  # 5 model frames at 10 fps: source frames 0, 3, ..., 12


def _write_clip_videos(path: Path, seed: int, kind: str, frames: int = FRAMES_30FPS) -> None:
    mc = debug_model()
    h, w = mc.height_px, mc.width_px
    yy, xx = np.mgrid[0:h, 0:w].astype(np.float32)
    rng = np.random.default_rng(seed)
    base = rng.uniform(0, 255, size=3)
    with MP4Writer(path, w, h, fps=30.0) as out:
        for t in range(frames):
            if kind == "rgb":
                img = np.stack([(xx * 2 + t * 4 + base[c]) % 256 for c in range(3)], -1)
            else:
                img = np.zeros((h, w, 3), np.float32)
                img[(yy.astype(int) + t) % 16 < 2] = (255, 255, 255)
                img[:, (int(base[0]) + 3 * t) % w] = (255, 0, 0)
            out.write(img.astype(np.uint8))


def _cli(*args: str) -> None:
    assert avsim_main([str(a) for a in args]) == 0, args


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_encode_train_export_generate(tmp_path: Path) -> None:
    from avsim.models.checkpoint import load_dit_state_dict
    from avsim.models.pipeline import build_dit, build_vae
    from avsim.models.text import save_prompt_embeddings
    from avsim.train.data import LatentClipDataset

    raw, cache, run = tmp_path / "layout", tmp_path / "cache", tmp_path / "run"
    mc = debug_model()
    _cli("sample", tmp_path / "scenario", "--duration-s", "1.5")
    size = f"{mc.width_px}x{mc.height_px}"
    _cli("render", tmp_path / "scenario", tmp_path / "render", "--rig", "cosmos", "--size", size, "--frames", "13")
    (clip_dir,) = [p for p in (tmp_path / "render").iterdir() if p.is_dir()]
    clip = clip_dir.name
    for j, cam in enumerate(COSMOS_VIEW_NAMES):
        (tmp_path / "real").mkdir(exist_ok=True)
        _write_clip_videos(tmp_path / "real" / f"{clip}.{cam}.mp4", seed=j, kind="rgb", frames=13)
    _cli("train", "pair", clip_dir, tmp_path / "real", raw, "--caption", "the sample town")
    vae_path = tmp_path / "vae.pth"
    torch.save(build_vae(mc, None, torch.device("cpu"), torch.float32, seed=7).state_dict(), vae_path)

    _cli("train", "encode", raw, cache, "--model", "debug", "--vae", vae_path, "--zero-text", "--store-dtype", "float32")
    ds = LatentClipDataset(cache)
    assert len(ds) == 1 and ds.num_views == 7 and ds.latent_frames == 2  # 13 frames at 30 fps = 5 at 10
    item = ds[0]
    assert item["video"].shape == (16, 14, mc.height_px // 8, mc.width_px // 8)
    assert not torch.equal(item["video"], item["control"])

    _cli("train", "run", "debug", "--cache", cache, "--out", run, "--steps", "20")
    log = [json.loads(line) for line in (run / "log.jsonl").read_text().splitlines()]
    assert [r["step"] for r in log] == list(range(1, 21))
    assert all(np.isfinite(r["loss"]) and r["tokens_per_s"] > 0 for r in log)
    assert sorted(p.name for p in (run / "checkpoints").iterdir()) == ["step_00000010", "step_00000020"]

    net = tmp_path / "net.pt"
    _cli("train", "export", run, net)
    state = load_dit_state_dict(net)
    assert all(v.dtype == torch.bfloat16 for v in state.values())
    dit = build_dit(mc, net, torch.device("cpu"), torch.float32)  # strict key and shape match
    trained_after = dit.state_dict()["control_blocks.0.after_proj.weight"]
    assert trained_after.abs().max() > 0  # zero-initialised, moved by training
    assert torch.equal(dit.state_dict()["blocks.0.mlp.layer1.weight"], state["blocks.0.mlp.layer1.weight"].float())

    zeros = torch.zeros(mc.dit.text_tokens_per_view, mc.dit.crossattn_proj_in_channels)
    emb = tmp_path / "emb.safetensors"
    save_prompt_embeddings(emb, zeros, zeros.clone(), zeros.clone())
    out = tmp_path / "gen"
    _cli(
        "generate", raw, out, "--config", "debug", "--checkpoint", net, "--vae", vae_path,
        "--embeddings", emb, "--steps", "2", "--device", "cpu",
        "--views", "front_wide,cross_right",  # two views keep the (CPU-slow) debug VAE short
    )
    videos = sorted(p.name for p in out.glob("*.mp4"))
    assert len(videos) == 3  # 2 views + grid


def test_pair_builds_the_layout_and_scan_reports_gaps(tmp_path: Path) -> None:
    from avsim.core.errors import AvsimInputError
    from avsim.train.data import ClipSpec, probe_clips, read_clip, scan_layout

    controls, videos, out = tmp_path / "render" / "drive1", tmp_path / "real", tmp_path / "layout"
    for j, cam in enumerate(COSMOS_VIEW_NAMES):
        for folder, kind in ((controls, "control"), (videos, "rgb")):
            folder.mkdir(parents=True, exist_ok=True)
            _write_clip_videos(folder / f"drive1.{cam}.mp4", seed=j, kind=kind, frames=30)
    _cli("train", "pair", controls, videos, out, "--caption", "rain at dusk")
    (record,) = scan_layout(out)
    assert record.name == "drive1" and record.caption == "rain at dusk" and record.views == COSMOS_VIEW_NAMES
    mc = debug_model()
    spec = ClipSpec(frames=5, height_px=mc.height_px, width_px=mc.width_px)
    stride, starts = probe_clips(record, spec, None)
    assert stride == 3 and starts == [0, 15]  # 30 frames hold two windows of 13 (5 at 10 fps)
    clip = read_clip(record.videos[0], starts[1], stride, spec)
    assert clip.shape == (3, 5, mc.height_px, mc.width_px) and clip.min() >= -1 and clip.max() <= 1
    (out / "videos" / f"ftheta_{COSMOS_VIEW_NAMES[3]}" / "drive1.mp4").unlink()
    with pytest.raises(AvsimInputError, match=COSMOS_VIEW_NAMES[3]):
        scan_layout(out)
