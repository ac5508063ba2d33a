"""End to end on the CPU with the debug model: `avsim train smoke` runs `avsim sample` ->
`avsim render` (control videos) -> `avsim train pair` (with camera videos) -> encode (random VAE)
-> 20 training steps on 2 gloo processes with cp 2 -> export -> `avsim generate` with the
exported weights.

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
from avsim.models.config import debug as debug_model
from avsim.train.smoke import write_synthetic_video

FRAMES_30FPS = 13  # 5 model frames at 10 fps: source frames 0, 3, ..., 12


def _write_clip_videos(path: Path, seed: int, kind: str, frames: int = FRAMES_30FPS) -> None:
    mc = debug_model()
    write_synthetic_video(path, seed, kind, frames, mc.width_px, mc.height_px)


def _cli(*args: str) -> None:
    assert avsim_main([str(a) for a in args]) == 0, args


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_smoke_chain_encode_train_export_generate(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys) -> None:
    """`avsim train smoke OUT`: every step's line, its files, nothing outside OUT, a second run refused."""
    from avsim.models.checkpoint import load_dit_state_dict
    from avsim.models.pipeline import build_dit
    from avsim.train.data import LatentClipDataset

    monkeypatch.chdir(tmp_path)
    out = tmp_path / "smoke"
    _cli("train", "smoke", out)
    captured = capsys.readouterr()
    printed = captured.out
    assert "NOISE" in printed.splitlines()[0]
    # the encode step says what it does while it runs (it was silent for 47 s): loading, then each view
    assert "encode: load VAE 0/1" in captured.err and "encode: VAE encode views (video, control) 14/14" in captured.err
    names = ["sample", "render", "real videos", "pair", "encode", "train", "export", "generate"]
    assert all(f"[{k}/8] {name} (" in printed for k, name in enumerate(names, 1))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["smoke"]  # nothing written outside OUT
    summary = json.loads((out / "smoke.json").read_text())
    assert [s["name"] for s in summary["steps"]] == names and summary["output_is_noise"] is True

    mc = debug_model()
    index = json.loads((out / "cache" / "index.json").read_text())
    assert index["random_vae"] is True and "RANDOM" in index["vae"]
    ds = LatentClipDataset(out / "cache")
    assert len(ds) == 1 and ds.num_views == 7 and ds.latent_frames == 2  # 13 frames at 30 fps = 5 at 10
    item = ds[0]
    assert item["video"].shape == (16, 14, mc.height_px // 8, mc.width_px // 8)
    assert not torch.equal(item["video"], item["control"])

    run = out / "run"
    log = [json.loads(line) for line in (run / "log.jsonl").read_text().splitlines()]
    assert [r["step"] for r in log] == list(range(1, 21))
    assert all(np.isfinite(r["loss"]) and r["tokens_per_s"] > 0 for r in log)
    assert sorted(p.name for p in (run / "checkpoints").iterdir()) == ["step_00000010", "step_00000020"]
    config = json.loads((run / "config.json").read_text())
    assert config["parallel"]["cp"] == 2

    net = out / "net.pt"
    state = load_dit_state_dict(net)
    assert all(v.dtype == torch.bfloat16 for v in state.values())
    dit = build_dit(mc, net, torch.device("cpu"), torch.float32)  # strict key and shape match
    trained_after = dit.state_dict()["control_blocks.0.after_proj.weight"]
    assert trained_after.abs().max() > 0  # zero-initialised, moved by training
    assert torch.equal(dit.state_dict()["blocks.0.mlp.layer1.weight"], state["blocks.0.mlp.layer1.weight"].float())

    videos = sorted(p.name for p in (out / "generate").glob("*.mp4"))
    assert len(videos) == 3  # 2 views + grid
    settings = json.loads((out / "generate" / "settings.json").read_text())
    assert settings["output_is_noise"] is True and settings["request"]["random_vae"] is True

    assert avsim_main(["train", "smoke", str(out)]) == 1  # OUT not empty: one line, nothing touched
    assert "not empty" in capsys.readouterr().err


def test_random_vae_and_zero_text_flags_refuse_conflicts(tmp_path: Path, capsys) -> None:
    """--random-vae replaces --vae (encode and generate); --zero-text replaces --embeddings."""
    weights = tmp_path / "w.pt"
    weights.write_bytes(b"")
    cases = [
        ["train", "encode", str(tmp_path), str(tmp_path / "c"), "--vae", str(weights), "--random-vae", "--zero-text"],
        ["generate", str(tmp_path), str(tmp_path / "g"), "--config", "debug", "--checkpoint", str(weights),
         "--vae", str(weights), "--random-vae", "--zero-text"],
        ["generate", str(tmp_path), str(tmp_path / "g"), "--config", "debug", "--checkpoint", str(weights),
         "--random-vae", "--zero-text", "--embeddings", str(weights)],
    ]
    for argv in cases:
        assert avsim_main(argv) == 2, argv
        err = capsys.readouterr().err
        assert "--random-vae" in err or "--zero-text" in err, err
    assert avsim_main(["train", "encode", str(tmp_path), str(tmp_path / "c"), "--zero-text"]) == 1
    assert "--random-vae" in capsys.readouterr().err
    assert not (tmp_path / "c").exists() and not (tmp_path / "g").exists()


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


def _write_frames(path: Path, frames: int, fps: float, size: tuple[int, int], noise: float = 0.0, seed: int = 0) -> None:
    """A moving gradient (a camera stand-in), or uniform noise of amplitude `noise` around mid grey."""
    from avsim.core.video import MP4Writer

    w, h = size
    rng = np.random.default_rng(seed)
    xx = np.arange(w, dtype=np.float32)[None, :, None]
    with MP4Writer(path, w, h, fps=fps) as writer:
        for t in range(frames):
            if noise:
                img = 128 + rng.uniform(-noise, noise, (h, w, 3))
            else:
                img = np.broadcast_to((xx * 2 + 4 * t) % 256, (h, w, 3))
            writer.write(np.clip(img, 0, 255).astype(np.uint8))


@pytest.mark.e2e
def test_pair_checks_rate_duration_aspect_and_noise(tmp_path: Path, capsys) -> None:
    """`avsim train pair` refuses what cannot be the control's drive, and never a plausible recording."""
    from avsim.train.pairing import pair_problems

    control = tmp_path / "control.mp4"
    _write_clip_videos(control, seed=0, kind="control", frames=13)  # 30 fps, 112x64, 13 frames
    cases = {  # name: (frames, fps, size, noise amplitude) -> the word of the refusal, or None (accepted)
        "same": ((13, 30.0, (112, 64), 0.0), None),
        "longer_and_larger": ((40, 30.0, (224, 128), 0.0), None),  # a longer recording at another resolution
        "one_frame_short": ((12, 30.0, (112, 64), 0.0), None),
        "dark_sensor_noise": ((13, 30.0, (112, 64), 6.0), None),  # a flat night frame: never refused on content
        "rate": ((13, 25.0, (112, 64), 0.0), "25 fps, the control 30 fps"),
        "short": ((6, 30.0, (112, 64), 0.0), "shorter than the control"),
        "aspect": ((13, 30.0, (64, 64), 0.0), "aspect ratio"),
        "noise": ((13, 30.0, (112, 64), 127.0), "looks like noise"),
    }
    for name, ((frames, fps, size, noise), refusal) in cases.items():
        real = tmp_path / f"{name}.mp4"
        _write_frames(real, frames, fps, size, noise)
        problems = pair_problems(real, control)
        if refusal is None:
            assert problems == [], (name, problems)
        else:
            assert len(problems) == 1 and refusal in problems[0], (name, problems)
    controls, videos, out = tmp_path / "render" / "drive1", tmp_path / "real", tmp_path / "layout"
    for j, cam in enumerate(COSMOS_VIEW_NAMES):
        for folder, kind in ((controls, "control"), (videos, "rgb")):
            folder.mkdir(parents=True, exist_ok=True)
            _write_clip_videos(folder / f"drive1.{cam}.mp4", seed=j, kind=kind, frames=13)
    _write_frames(videos / f"drive1.{COSMOS_VIEW_NAMES[2]}.mp4", 13, 30.0, (112, 64), 127.0)  # one view is noise
    assert avsim_main(["train", "pair", str(controls), str(videos), str(out), "--caption", "x"]) == 1
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and COSMOS_VIEW_NAMES[2] in err and "noise" in err and not out.exists()
