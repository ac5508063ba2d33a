"""Labels beside the generated videos (`avsim generate` from a control folder rendered with `--labels`).

`avsim render --labels` writes `CONTROL/<clip>/labels/` (docs/labels.md). When the control
clip that `avsim generate` reads has such a folder, the generated clip gets the same labels
as `OUT/labels/` (a relative symlink where the file system allows one, else a copy) and
`settings.json["labels"]` records which control render they came from. The labels' frame
index <-> timestamp <-> video frame mapping serves the generated videos unchanged only when
the generated video has the control video's frames: same rate (the model rate), same size
(the model size) and the same frame count. That is checked before any model is loaded
(`check_pairing`, from the labels' `index.json` and the control video's header) and again
on the generated frames (`place_labels`); a mismatch is a one-line input error.
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from avsim.core.errors import AvsimInputError
from avsim.core.safe_json import read_json
from avsim.core.video import video_info

LABELS_FOLDER = "labels"


@dataclass(frozen=True)
class LabelsPairing:
    """Control labels that pair with a generated clip.

    folder: the control clip's `labels/` folder; video_clip: the clip id of the control video
    (`index.json["frames"][*]["video_clip"]`); frames: labelled frames of that video (N);
    fps: their rate; width_px, height_px: the labelled image size.
    """

    folder: Path
    video_clip: str
    frames: int
    fps: float
    width_px: int
    height_px: int

    def __post_init__(self) -> None:
        if self.frames < 1 or self.fps <= 0 or self.width_px < 1 or self.height_px < 1:
            raise ValueError(f"invalid labels pairing {self}")


def find_control_labels(control_dir: Path, clip: str) -> Path | None:
    """The `labels/` folder whose index lists frames of control video clip `clip`, or None.

    Args:
        control_dir: the folder given to `avsim generate`: an `avsim render` output
            (`<dir>/<clip>/labels`) or one clip folder of it (`<dir>/labels`).
        clip: the clip id `avsim generate` found (`<clip>` or `<clip>_<k>` with `--chunk`).

    Returns:
        The labels folder, or None when the render wrote no labels.
    """
    root = Path(control_dir)
    own = [root / LABELS_FOLDER / "index.json"] if (root / LABELS_FOLDER / "index.json").is_file() else []
    for index in [*own, *sorted(root.glob(f"*/{LABELS_FOLDER}/index.json"))]:
        doc = read_json(index, "labels index")
        frames = doc.get("frames", []) if isinstance(doc, dict) else []
        if any(isinstance(f, dict) and f.get("video_clip") == clip for f in frames):
            return index.parent
    return None


def check_pairing(folder: Path, clip: str, control_video: Path, frames: int, fps: float, size: tuple[int, int]) -> LabelsPairing:
    """Check that labels made for `control_video` index a generated clip of `frames` at `fps` and `size` unchanged.

    Args:
        folder: the control `labels/` folder (`find_control_labels`).
        clip: the control video's clip id.
        control_video: one of the control clip's videos (its header gives frames and rate).
        frames: frames the generated videos will have (T).
        fps: their rate (the model rate).
        size: their (width, height) in pixels.

    Returns:
        The pairing.

    Raises:
        AvsimInputError: the generated clip will not have the control video's frames.
    """
    doc = read_json(folder / "index.json", "labels index")
    mine = [f for f in doc.get("frames", []) if f.get("video_clip") == clip]
    info = video_info(control_video)
    got = (int(info["frames"]), round(float(info["fps"]), 6), int(info["width_px"]), int(info["height_px"]))
    want = (int(frames), round(float(fps), 6), int(size[0]), int(size[1]))
    labelled = sorted(int(f["video_frame"]) for f in mine) == list(range(got[0]))
    if got != want or not labelled:
        raise AvsimInputError(folder / "index.json", "frames",
                              f"labels of {got[0]} frames at {got[1]:g} fps, {got[2]}x{got[3]} cannot index the generated "
                              f"{want[0]} frames at {want[1]:g} fps, {want[2]}x{want[3]}: render with --labels --fps {want[1]:g} "
                              f"--size {want[2]}x{want[3]} --frames {want[0]}, or generate from a folder without labels/")  # fmt: skip
    return LabelsPairing(folder, clip, got[0], float(fps), got[2], got[3])


def place_labels(pairing: LabelsPairing, tmp_out: Path, final_out: Path, generated_frames: int) -> dict[str, Any]:
    """Put the control labels beside the generated videos: `OUT/labels` (relative symlink, else a copy).

    Args:
        pairing: the checked pairing.
        tmp_out: the temporary output folder being filled (renamed to `final_out` afterwards).
        final_out: the output folder (the symlink is relative to where it will be).
        generated_frames: frames of the generated videos (checked again against the labels).

    Returns:
        The `settings.json["labels"]` record: folder, how it was placed, where from, the mapping.

    Raises:
        AvsimInputError: the generated videos do not have the labelled frame count.
    """
    if generated_frames != pairing.frames:
        raise AvsimInputError(pairing.folder / "index.json", "frames",
                              f"generated {generated_frames} frames, the labels index {pairing.frames}")  # fmt: skip
    src = pairing.folder.resolve()
    link = Path(tmp_out) / LABELS_FOLDER
    target = os.path.relpath(src, Path(final_out).resolve().parent / Path(final_out).name)
    try:
        link.symlink_to(target, target_is_directory=True)
        how = "symlink"
    except OSError:  # no symlinks here (some Windows and network file systems): copy
        shutil.copytree(src, link)
        how = "copy"
    return {
        "folder": LABELS_FOLDER, "placed_as": how, "control_labels": str(src), "control_clip": pairing.video_clip,
        "frame_mapping": "identical", "frames": pairing.frames, "fps": pairing.fps,
        "width_px": pairing.width_px, "height_px": pairing.height_px,
        "note": "each labels/index.json frame is frame video_frame of <video_clip>.<camera>.mp4 in this folder",
    }  # fmt: skip
