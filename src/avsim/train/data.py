"""Post-training data: the public on-disk layout, clip sampling, and the latent-cache dataset.

Raw layout (transfer_model.md section 8)::

    <root>/videos/ftheta_<camera>/<name>.mp4                     real camera videos (30 fps)
    <root>/control_input_hdmap_bbox/ftheta_<camera>/<name>.mp4   rendered control videos
    <root>/captions/ftheta_camera_front_wide_120fov/<name>.json  {"caption": "..."}

Training never reads those: ``avsim train encode`` (:mod:`avsim.train.encode`) turns each clip
into one safetensors file of latents and text embeddings (the cache), and
:class:`LatentClipDataset` + :class:`ClipBatchSampler` serve that cache, deterministically
per data-parallel rank and resumable at any batch.
"""

from __future__ import annotations

import json
import math
import os
import shutil
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from torch import Tensor

from avsim.core.atomic import atomic_output_path
from avsim.core.errors import AvsimInputError
from avsim.core.rig import COSMOS_VIEW_NAMES
from avsim.core.video import iter_video_frames, video_info

VIDEOS_DIR = "videos"
CONTROLS_DIR = "control_input_hdmap_bbox"
CAPTIONS_DIR = "captions"
CAPTION_VIEW = COSMOS_VIEW_NAMES[0]  # captions describe the front-wide view


def camera_dir(kind: str, camera: str) -> str:
    """``<kind>/ftheta_<camera>`` (e.g. ``videos/ftheta_camera_front_wide_120fov``)."""
    return f"{kind}/ftheta_{camera}"


@dataclass(frozen=True)
class ClipRecord:
    """One named clip of the raw layout: a video and a control per view, one caption."""

    name: str
    views: tuple[str, ...]
    videos: tuple[Path, ...]
    controls: tuple[Path, ...]
    caption: str


def read_caption(path: Path) -> str:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise AvsimInputError(path, "json", f"cannot read caption: {exc}") from exc
    if not isinstance(data, dict) or not isinstance(data.get("caption"), str):
        raise AvsimInputError(path, "caption", 'expected an object {"caption": "<text>"}')
    return data["caption"]


def scan_layout(root: str | os.PathLike[str], views: Sequence[str] = COSMOS_VIEW_NAMES) -> list[ClipRecord]:
    """All clips of `root` that have a video and a control for every view, sorted by name.

    A clip missing any file is an input error (named), not silently skipped: a half-rendered
    dataset should not train on fewer views than asked for.
    """
    first = Path(root) / camera_dir(CONTROLS_DIR, views[0])
    if not first.is_dir():
        raise AvsimInputError(first, "folder", "no control videos for the first view")
    names = layout_clips(root, views)
    if not names:
        raise AvsimInputError(first, "folder", "no .mp4 clips")
    return [clip_record(root, name, views) for name in names]


def clip_record(root: str | os.PathLike[str], name: str, views: Sequence[str] = COSMOS_VIEW_NAMES) -> ClipRecord:
    """The clip `name` of the layout at `root`: every view's video and control, and its caption.

    Args:
        root: the layout root.
        name: the clip name.
        views: the views it must have.

    Returns:
        The record.

    Raises:
        AvsimInputError: a file is missing (named).
    """
    root = Path(root)
    videos = tuple(root / camera_dir(VIDEOS_DIR, v) / f"{name}.mp4" for v in views)
    controls = tuple(root / camera_dir(CONTROLS_DIR, v) / f"{name}.mp4" for v in views)
    for path in videos + controls:
        if not path.is_file():
            raise AvsimInputError(path, "file", f"clip {name!r} lacks this view")
    caption_path = caption_file(root, name)
    if not caption_path.is_file():
        raise AvsimInputError(caption_path, "file", f"clip {name!r} has no caption")
    return ClipRecord(name, tuple(views), videos, controls, read_caption(caption_path))


def caption_file(root: str | os.PathLike[str], name: str) -> Path:
    """`<root>/captions/ftheta_<front wide>/<name>.json`."""
    return Path(root) / camera_dir(CAPTIONS_DIR, CAPTION_VIEW) / f"{name}.json"


def layout_clips(root: str | os.PathLike[str], views: Sequence[str] = COSMOS_VIEW_NAMES) -> list[str]:
    """The clip names of the layout at `root` (its first view's control videos), sorted; reads nothing else.

    Args:
        root: the layout root.
        views: the views (the first one's folder is listed).

    Returns:
        The names (possibly none).
    """
    first = Path(root) / camera_dir(CONTROLS_DIR, views[0])
    return sorted(p.stem for p in first.glob("*.mp4")) if first.is_dir() else []


# ---------------------------------------------------------------------------------------------
# frames


@dataclass(frozen=True)
class ClipSpec:
    """What one training clip is: ``frames`` frames at ``fps`` resized to height x width.

    Sources at a higher rate are subsampled by ``round(source_fps / fps)`` (30 -> 10 fps: every
    3rd frame). ``frames`` must be 1 + 4k (the VAE's causal 4x time compression).
    """

    frames: int = 29
    fps: float = 10.0
    height_px: int = 720
    width_px: int = 1280

    def __post_init__(self) -> None:
        if self.frames < 1 or (self.frames - 1) % 4:
            raise ValueError(f"frames must be 1 + 4k, got {self.frames}")
        if self.height_px % 16 or self.width_px % 16:
            raise ValueError(f"height and width must be multiples of 16, got {self.height_px}x{self.width_px}")

    @property
    def latent_frames(self) -> int:
        return 1 + (self.frames - 1) // 4


def frame_stride(path: Path, source_fps: float, fps: float) -> int:
    stride = source_fps / fps
    if source_fps <= 0 or stride < 1 or abs(stride - round(stride)) > 0.02 * stride:
        raise AvsimInputError(path, "fps", f"{source_fps:g} fps is not a whole multiple of {fps:g} fps")
    return round(stride)


def clip_starts(num_frames: int, stride: int, spec: ClipSpec, max_clips: int | None) -> list[int]:
    """Start frames of the non-overlapping clips a video of `num_frames` frames holds."""
    span = (spec.frames - 1) * stride + 1
    count = (num_frames - span) // (spec.frames * stride) + 1 if num_frames >= span else 0
    if max_clips is not None:
        count = min(count, max_clips)
    return [i * spec.frames * stride for i in range(count)]


def resize_frames(frames: np.ndarray, height_px: int, width_px: int) -> Tensor:
    """(T, H, W, 3) uint8 -> (3, T, height, width) float32 in [-1, 1].

    Exactly the generation pipeline's preprocessing (bilinear antialiased resize rounded to
    uint8, then x / 127.5 - 1), so training sees what inference will feed.
    """
    from avsim.models.video_io import resize_frames as resize_uint8
    from avsim.models.video_io import to_model_range

    x = resize_uint8(torch.from_numpy(frames).permute(0, 3, 1, 2), height_px, width_px)
    return to_model_range(x)[0]


def read_clip(path: Path, start: int, stride: int, spec: ClipSpec) -> Tensor:
    """Frames start, start+stride, ... of a video -> (3, frames, H, W) float32 in [-1, 1]."""
    wanted = {start + i * stride for i in range(spec.frames)}
    last = max(wanted)
    kept = []
    for i, frame in enumerate(iter_video_frames(path)):
        if i in wanted:
            kept.append(frame)
        if i >= last:
            break
    if len(kept) != spec.frames:
        raise AvsimInputError(path, "frames", f"needs frame {last}, video ends at {i}")
    return resize_frames(np.stack(kept), spec.height_px, spec.width_px)


def probe_clips(record: ClipRecord, spec: ClipSpec, max_clips: int | None) -> tuple[int, list[int]]:
    """(stride, clip starts) valid for every video and control of a record."""
    strides, counts = set(), []
    for path in record.videos + record.controls:
        info = video_info(path)
        strides.add(frame_stride(path, float(info["fps"]), spec.fps))
        counts.append(int(info["frames"]))
    if len(strides) != 1:
        raise AvsimInputError(record.videos[0], "fps", f"clip {record.name!r} mixes frame rates")
    stride = strides.pop()
    return stride, clip_starts(min(counts), stride, spec, max_clips)


# ---------------------------------------------------------------------------------------------
# assembling the layout from a render


def assemble_layout(
    out_root: str | os.PathLike[str],
    name: str,
    controls: dict[str, Path],
    videos: dict[str, Path],
    caption: str,
) -> None:
    """Write one clip into the post-training layout at `out_root` (copies; atomic per file).

    ``controls`` / ``videos``: camera name -> mp4 (e.g. `avsim render` outputs and the user's
    real recordings of the same drive). Every model view needs both.
    """
    out_root = Path(out_root)
    for kind, files in ((CONTROLS_DIR, controls), (VIDEOS_DIR, videos)):
        for view in COSMOS_VIEW_NAMES:
            src = files.get(view)
            if src is None or not Path(src).is_file():
                raise AvsimInputError(src or out_root, kind, f"no {kind} video for view {view}")
            with atomic_output_path(out_root / camera_dir(kind, view) / f"{name}.mp4") as tmp:
                shutil.copyfile(src, tmp)
    with atomic_output_path(out_root / camera_dir(CAPTIONS_DIR, CAPTION_VIEW) / f"{name}.json") as tmp:
        tmp.write_text(json.dumps({"caption": caption}), encoding="utf-8")


LABELS_DIR = "labels"  # <root>/labels/<clip>/: the control render's labels (docs/labels.md), when it wrote any


def carry_labels(controls: str | os.PathLike[str], out_root: str | os.PathLike[str], name: str) -> Path | None:
    """Copy a control clip folder's `labels/` (`avsim render --labels`) to `<out_root>/labels/<name>/` (atomic).

    The layout's control videos are byte copies of the render's, so the labels' frame index <->
    video frame mapping (`index.json`) holds for `control_input_hdmap_bbox/ftheta_<camera>/<name>.mp4`.

    Args:
        controls: the clip's control folder (`OUT/<clip>` of `avsim render`).
        out_root: the post-training layout root.
        name: the clip name in the layout.

    Returns:
        The copied folder, or None when the render wrote no labels.
    """
    src = Path(controls) / LABELS_DIR
    if not (src / "index.json").is_file():
        return None
    dst = Path(out_root) / LABELS_DIR / name
    dst.parent.mkdir(parents=True, exist_ok=True)
    with atomic_output_path(dst, is_dir=True) as tmp:
        shutil.copytree(src, tmp, dirs_exist_ok=True, ignore=shutil.ignore_patterns(".parts"))
    return dst


def find_camera_videos(folder: str | os.PathLike[str], clip: str | None = None) -> dict[str, Path]:
    """Camera -> mp4 in a folder of ``<clip>.<camera>.mp4`` files (the render's per-clip layout)."""
    out: dict[str, Path] = {}
    for path in sorted(Path(folder).glob("*.mp4")):
        stem = path.name[: -len(".mp4")]
        for view in COSMOS_VIEW_NAMES:
            if stem.endswith(f".{view}") and (clip is None or stem == f"{clip}.{view}"):
                out[view] = path
    return out


# ---------------------------------------------------------------------------------------------
# latent cache


INDEX_FILE = "index.json"
BLANK_FILE = "blank_text.safetensors"


class LatentClipDataset(torch.utils.data.Dataset):
    """The encoded cache written by `avsim train encode`.

    Item: ``video`` / ``control`` (C, V*T, h, w) latents, ``text`` (V*N, D) embeddings
    (caption on view 0, the blank prompt on the others, as at inference), ``name`` str.
    """

    def __init__(self, cache_dir: str | os.PathLike[str]) -> None:
        self.root = Path(cache_dir)
        index_path = self.root / INDEX_FILE
        if not index_path.is_file():
            raise AvsimInputError(index_path, "file", "not an encoded cache (run `avsim train encode`)")
        self.index = json.loads(index_path.read_text(encoding="utf-8"))
        self.samples: list[str] = list(self.index["samples"])
        if not self.samples:
            raise AvsimInputError(index_path, "samples", "cache holds no clips")
        self.num_views = int(self.index["num_views"])
        self.latent_frames = int(self.index["latent_frames"])
        self._blank: Tensor | None = None

    def __len__(self) -> int:
        return len(self.samples)

    def _load(self, path: Path) -> dict[str, Tensor]:
        from safetensors.torch import load_file

        try:
            return load_file(path)
        except Exception as exc:  # safetensors raises several types for bad files
            raise AvsimInputError(path, "safetensors", str(exc)) from exc

    def __getitem__(self, i: int) -> dict[str, Tensor | str]:
        item = self._load(self.root / self.samples[i])
        if self._blank is None:
            self._blank = self._load(self.root / BLANK_FILE)["text"]
        caption = item["text"]
        text = torch.cat([caption] + [self._blank] * (self.num_views - 1), dim=0)
        return {"video": item["video"], "control": item["control"], "text": text, "name": self.samples[i]}


def collate(items: list[dict[str, Tensor | str]]) -> dict[str, Tensor | list[str]]:
    out: dict[str, Tensor | list[str]] = {k: torch.stack([it[k] for it in items]) for k in ("video", "control", "text")}  # type: ignore[misc]
    out["name"] = [str(it["name"]) for it in items]
    return out


class ClipBatchSampler(torch.utils.data.Sampler[list[int]]):
    """Deterministic, resumable batches for one data-parallel rank.

    The global stream is the concatenation of per-epoch permutations (seeded by seed + epoch);
    global batch g holds stream positions ``[g*B*dp, (g+1)*B*dp)``, rank r takes its r-th
    slice of B. ``start_batch`` skips the batches already consumed, so a resumed run sees
    exactly what an uninterrupted one would. Infinite: training stops on its own step count.
    """

    def __init__(
        self, num_samples: int, batch_size: int, dp_rank: int, dp_size: int, seed: int, start_batch: int = 0
    ) -> None:
        if not 0 <= dp_rank < dp_size or batch_size < 1 or num_samples < 1:
            raise ValueError("need 0 <= dp_rank < dp_size, batch_size >= 1, num_samples >= 1")
        self.n, self.bs, self.rank, self.dp, self.seed = num_samples, batch_size, dp_rank, dp_size, seed
        self.start_batch = start_batch
        self._perms: dict[int, Tensor] = {}

    def _perm(self, epoch: int) -> Tensor:
        if epoch not in self._perms:
            g = torch.Generator()
            g.manual_seed(self.seed * 100_003 + epoch)
            self._perms = {epoch: torch.randperm(self.n, generator=g)}  # keep one epoch only
        return self._perms[epoch]

    def batch_indices(self, batch: int) -> list[int]:
        """The sample indices of this rank's `batch`-th batch."""
        first = (batch * self.dp + self.rank) * self.bs
        out = []
        for pos in range(first, first + self.bs):
            out.append(int(self._perm(pos // self.n)[pos % self.n]))
        return out

    def __iter__(self) -> Iterator[list[int]]:
        b = self.start_batch
        while True:
            yield self.batch_indices(b)
            b += 1

    def __len__(self) -> int:  # one epoch's worth; the iterator itself never ends
        return math.ceil(self.n / (self.bs * self.dp))


def make_loader(
    dataset: LatentClipDataset,
    batch_size: int,
    dp_rank: int,
    dp_size: int,
    seed: int,
    start_batch: int,
    num_workers: int,
) -> torch.utils.data.DataLoader:
    sampler = ClipBatchSampler(len(dataset), batch_size, dp_rank, dp_size, seed, start_batch)
    return torch.utils.data.DataLoader(
        dataset,
        batch_sampler=sampler,
        num_workers=num_workers,
        collate_fn=collate,
        persistent_workers=False,
        multiprocessing_context="spawn" if num_workers else None,
        # its own generator: iterating a DataLoader draws a base seed, which from the global RNG
        # would make a resumed run's RNG (restored before the loader starts) one draw ahead
        generator=torch.Generator().manual_seed(seed),
    )
