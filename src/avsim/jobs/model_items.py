"""The model kinds of `avsim run`: generate, pair and encode, one task per item (docs/jobs.md).

- **generate** (item: one `avsim run render` item folder): every clip of the item is generated
  into `OUT/<item>/<clip>/` by `avsim.models.generate.run_generate_clips` (as `avsim generate`
  of that clip, the models loaded once per item), with its labels remapped to the generated
  frames when the render wrote labels.
- **pair** (item: one render item folder): each clip's control folder and the item's real
  recordings (`--real ROOT`: `ROOT/<item>/<clip>.<camera>.mp4`, or a manifest column `real`)
  are checked and added to a one-item post-training layout `OUT/clips/<item>/` by
  `avsim.train.jobs.pair_clip`; the driver then links every item's files into the shared
  layout at `OUT/` (`merge_layout`).
- **encode** (item: one clip of a post-training layout): its latents go to `OUT/<clip>/` by
  `avsim.train.encode.CacheEncoder`; the driver writes `OUT/index.json` and
  `OUT/blank_text.safetensors` over every encoded clip (`merge_cache`), so `OUT` is a latent
  cache `avsim train run --cache OUT` reads.

Weight files are digested once on the driver (`weight_digests`) and enter each item's input
digest, so changed weights re-run every item while a rerun with the same weights skips it. The
three kinds' entries in `avsim.jobs.kinds.KINDS` name the functions here.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from avsim.core.atomic import atomic_output_path
from avsim.core.digest import folder_files, input_digest
from avsim.core.errors import AvsimInputError
from avsim.jobs.dataset import Item
from avsim.jobs.tasks import JOB_JSON, ItemResult, ItemStatus, ItemTask

PAIR_CLIPS = "clips"  # `avsim run pair` items live in OUT/clips/<item>/; OUT/ itself is the merged layout
WEIGHT_OPTIONS = ("checkpoint", "vae", "embeddings")  # files whose content (not path) an item's digest covers
RENDER_RECORDS = ("render_summary.json", "render_inputs.json", "job.json")  # timings and paths: not generation inputs
_GENERATE_KEYS = ("config", "views", "clip", "prompt", "negative_prompt", "text_encoder", "zero_text", "random_weights",
                  "random_vae", "device", "offload")  # fmt: skip


def weight_digests(options: Mapping[str, Any]) -> dict[str, str]:
    """sha256 of each weight file named in `options` (`checkpoint`, `vae`, `embeddings`), computed once per job.

    Args:
        options: the command's options.

    Returns:
        `{"<option>_digest": hex}` for each given file.
    """
    out = {}
    for key in WEIGHT_OPTIONS:
        if options.get(key):
            path = Path(str(options[key]))
            if not path.is_file():
                raise AvsimInputError(path, f"--{key.replace('_', '-')}", "file not found")
            out[f"{key}_digest"] = input_digest([path], path.parent, {})
    return out


def render_item_inputs(task: ItemTask) -> tuple[list[Path], Path, dict[str, Any]]:
    """generate: the files a render item's digest covers: its videos and labels, not the render's
    records (they hold timings and paths).

    Args:
        task: a generate task (source: the render item folder).

    Returns:
        The files (under the root), the root, and no options to replace.
    """
    return [p for p in folder_files(task.source) if p.name not in RENDER_RECORDS], task.source, {}


def pair_inputs(task: ItemTask) -> tuple[list[Path], Path, dict[str, Any]]:
    """pair: the render item's files (as `render_item_inputs`) and the item's real videos, by
    content (the option `real`, a path, is replaced by their digest).

    Args:
        task: a pair task.

    Returns:
        The files (under the root), the root, and `{"real": digest}`.
    """
    files, root, _ = render_item_inputs(task)
    real = Path(str(task.options["real"]))
    real_files = folder_files(real) if real.is_dir() else []
    return files, root, {"real": input_digest(real_files, real, {})}


def encode_inputs(task: ItemTask) -> tuple[list[Path], Path, dict[str, Any]]:
    """encode: the clip's videos, controls and caption in the layout.

    Args:
        task: an encode task (source: the layout; options: its `clip`).

    Returns:
        The files (under the layout), the layout, and no options to replace.
    """
    from avsim.train.data import caption_file

    record = _record(task.source, str(task.options["clip"]))
    return [*record.videos, *record.controls, caption_file(task.source, record.name)], task.source, {}


def pair_item_options(base: Mapping[str, Any], item: Item, dataset: Path) -> dict[str, Any]:
    """pair: an item's real videos folder: its manifest column `real`, else `--real ROOT` / <item>.

    Args:
        base: the command's typed options.
        item: the item (its own options as the manifest gave them).
        dataset: the dataset (named in an error).

    Returns:
        `{"real": absolute folder}`.
    """
    if item.options.get("real"):
        return {"real": str(Path(str(item.options["real"])).resolve())}
    if not base.get("real"):
        raise AvsimInputError(dataset, "--real", "`avsim run pair` needs the real videos (--real ROOT or a manifest column real)")
    return {"real": str((Path(str(base["real"])) / item.name).resolve())}


def encode_item_options(base: Mapping[str, Any], item: Item, dataset: Path) -> dict[str, Any]:
    """encode: the clip an item encodes (its name: one item per clip of the layout)."""
    return {"clip": item.name}


def _record(layout: Path, clip: str) -> Any:
    """The `ClipRecord` of `clip` in the layout at `layout` (its files checked, its caption read)."""
    from avsim.train.data import clip_record

    return clip_record(layout, clip)


def generate_request(control_dir: Path, options: Mapping[str, Any]) -> Any:
    """The `avsim.models.generate.GenerateRequest` of one item from `avsim run generate`'s options.

    Args:
        control_dir: the render item folder.
        options: the item's typed options.

    Returns:
        The request (its `out` is unused: every clip writes its own folder).
    """
    from avsim.models.config import get_config
    from avsim.models.generate import GenerateRequest, sampling_options, split_views

    try:
        cfg = get_config(str(options.get("config", "transfer25_2b_multiview")))
    except KeyError as exc:
        raise AvsimInputError("options", "config", str(exc)) from None
    sampling = {k: options[k] for k in ("seed", "control_weight", "sampler", "chunks", "overlap") if k in options}
    text: dict[str, Any] = {"negative_prompt": str(options["negative_prompt"])} if options.get("negative_prompt") else {}
    return GenerateRequest(
        control_dir=control_dir, out=control_dir, config=cfg.name, views=split_views([str(options.get("views", ""))]),
        checkpoint=_path(options, "checkpoint"), vae=_path(options, "vae"), embeddings=_path(options, "embeddings"),
        text_encoder=_path(options, "text_encoder"), prompt=options.get("prompt"), clip=options.get("clip"),
        zero_text=bool(options.get("zero_text")), random_weights=bool(options.get("random_weights")),
        random_vae=bool(options.get("random_vae")), device=options.get("device"), offload=bool(options.get("offload")),
        vae_tile_px=options.get("vae_tile"),
        options=sampling_options(cfg, steps=options.get("steps"), guidance=options.get("guidance"), **sampling), **text,
    )  # fmt: skip


def warn_labels_for_generation(options: Mapping[str, Any]) -> None:
    """`avsim run render --labels --size WxH`: warn, before anything renders, when labels of that size
    can feed no model (`avsim run generate` remaps labels only to a model size of the same aspect).

    Args:
        options: the render command's typed options.
    """
    import warnings

    from avsim.core.errors import AvsimWarning
    from avsim.jobs.options import parse_size
    from avsim.models.config import CONFIGS
    from avsim.models.labels_scaling import same_aspect

    if not options.get("labels") or not options.get("size"):
        return
    size = parse_size(str(options["size"]), "--size")
    models = {name: (cfg().width_px, cfg().height_px) for name, cfg in CONFIGS.items()}
    if not any(same_aspect(size, px) for px in models.values()):
        sizes = ", ".join(f"{name} {w}x{h}" for name, (w, h) in models.items())
        warnings.warn(f"--labels --size {size[0]}x{size[1]}: these labels cannot feed `avsim run generate`, which remaps "
                      f"labels only to a model size of the same aspect ({sizes}); render at such an aspect to generate "
                      "from this render", AvsimWarning, stacklevel=2)  # fmt: skip


def check_generate_options(options: Mapping[str, Any]) -> None:
    """Refuse conflicting weight and text options once, on the driver (`avsim generate`'s rules)."""
    from avsim.models.generate import check_request

    request = generate_request(Path("."), options)
    if (request.prompt is None) != (request.text_encoder is None):
        raise AvsimInputError("--prompt", "text", "--prompt and --text-encoder go together")
    check_request(request)
    if not (request.random_weights or request.zero_text or request.embeddings or request.prompt):
        raise AvsimInputError("--prompt", "text", "give --prompt with --text-encoder, --embeddings, or --zero-text")


def generate_item(task: ItemTask, tmp: Path) -> None:
    """Generate every clip of one render item into `tmp/<clip>/`.

    Args:
        task: the item (source: the render item folder; options: `avsim run generate`'s).
        tmp: the item's temporary output folder.
    """
    from avsim.jobs.progress import current_item
    from avsim.models.generate import run_generate_clips

    run_generate_clips(generate_request(task.source, task.options), tmp, progress=current_item())


def _path(options: Mapping[str, Any], key: str) -> Path | None:
    return Path(str(options[key])) if options.get(key) else None


def pair_item(task: ItemTask, tmp: Path) -> None:
    """Add every clip of one render item, with the item's real videos, to a one-item layout at `tmp`.

    Args:
        task: the item (options: `real`, the item's real videos folder, and `caption`).
        tmp: the item's temporary output folder.
    """
    from avsim.core.rig import COSMOS_VIEW_NAMES
    from avsim.jobs.progress import current_item
    from avsim.models.video_io import view_clips
    from avsim.train.jobs import pair_clip

    caption = task.options.get("caption")
    if not caption:
        raise AvsimInputError(task.source, "caption", "no caption: give --caption or a manifest column caption")
    real = Path(str(task.options["real"]))
    if not real.is_dir():
        raise AvsimInputError(real, "real", "no folder of real videos for this item")
    clips = view_clips(task.source, COSMOS_VIEW_NAMES, kind="control")
    if not clips:
        raise AvsimInputError(task.source, "videos", f"no clip with a control video for every view {list(COSMOS_VIEW_NAMES)}")
    item = current_item()
    for k, (clip, paths) in enumerate(clips.items()):
        item("pair", k, len(clips), "clips")
        pair_clip(paths[COSMOS_VIEW_NAMES[0]].parent, real, tmp, str(caption), clip)


def encode_item(task: ItemTask, tmp: Path) -> None:
    """Encode one clip of a post-training layout into `tmp/<clip>_<k>.safetensors` (and its blank text).

    Args:
        task: the item (source: the layout root; options: the clip and `avsim run encode`'s).
        tmp: the item's temporary output folder.
    """
    from avsim.jobs.progress import current_item
    from avsim.train.jobs import build_cache_encoder

    encoder = build_cache_encoder(encode_settings(task.options), current_item())
    encoder.write_blank(tmp)
    encoder.encode_record(_record(task.source, str(task.options["clip"])), tmp)


def encode_settings(options: Mapping[str, Any]) -> Any:
    """The `avsim.train.jobs.EncodeSettings` of `avsim run encode`'s options."""
    from avsim.train.jobs import EncodeSettings

    return EncodeSettings(
        model=str(options.get("model", "transfer25_2b_multiview")), vae=_path(options, "vae"),
        random_vae=bool(options.get("random_vae")), text_encoder=_path(options, "text_encoder"),
        zero_text=bool(options.get("zero_text")), max_clips_per_video=options.get("max_clips_per_video"),
        device=options.get("device"), store_dtype=str(options.get("store_dtype", "bfloat16")),
    )  # fmt: skip


def _link(src: Path, dst: Path) -> None:
    """`dst` as a hard link of `src` (a copy across file systems)."""
    dst.parent.mkdir(parents=True, exist_ok=True)
    try:
        os.link(src, dst)
    except OSError:
        shutil.copyfile(src, dst)


def merge_layout(out: Path, tasks: list[ItemTask], results: list[ItemResult]) -> list[ItemResult]:
    """Rebuild the shared post-training layout at `out` from the items that are done or skipped.

    Each of `videos/`, `control_input_hdmap_bbox/`, `captions/` and `labels/` is replaced as a
    whole (atomically) by hard links to the items' files, so the layout holds exactly the
    current items. A clip name that an earlier item (by name) already holds fails the later item.

    Args:
        out: the job's output folder (items in `out/clips/<item>/`).
        tasks, results: the items and how they ended, in the same order.

    Returns:
        The results, with collisions turned into failures.
    """
    owner: dict[str, str] = {}
    merged: list[ItemResult] = []
    files: list[tuple[Path, Path]] = []
    for task, result in zip(tasks, results, strict=True):
        if result.status == ItemStatus.FAILED:
            merged.append(result)
            continue
        mine = [p for p in folder_files(task.out_dir) if p.relative_to(task.out_dir).parts[0] != "job.json"]
        clips = {_clip_of(p.relative_to(task.out_dir)) for p in mine}
        taken = sorted(c for c in clips if c in owner)
        if taken:
            reason = f"clip {taken[0]} is also in item {owner[taken[0]]}; the layout holds one clip of a name"
            merged.append(ItemResult(result.name, ItemStatus.FAILED, reason, result.seconds, result.digest))
            continue
        owner.update(dict.fromkeys(clips, task.name))
        files += [(p, p.relative_to(task.out_dir)) for p in mine]
        merged.append(result)
    from avsim.train.data import CAPTIONS_DIR, CONTROLS_DIR, LABELS_DIR, VIDEOS_DIR

    for top in (VIDEOS_DIR, CONTROLS_DIR, CAPTIONS_DIR, LABELS_DIR):
        with atomic_output_path(out / top, is_dir=True) as tmp:
            for src, rel in files:
                if rel.parts[0] == top:
                    _link(src, tmp / Path(*rel.parts[1:]))
    return merged


def _clip_of(rel: Path) -> str:
    """The clip a layout file belongs to: `labels/<clip>/...` or `<kind>/ftheta_<camera>/<clip>.<ext>`."""
    return rel.parts[1] if rel.parts[0] == "labels" else Path(rel.parts[-1]).stem


def merge_cache(out: Path, tasks: list[ItemTask], results: list[ItemResult]) -> int:
    """Write the latent cache's `index.json` and `blank_text.safetensors` over the encoded clips.

    Args:
        out: the cache folder (items in `out/<clip>/`).
        tasks, results: the items and how they ended, in the same order.

    Returns:
        The number of samples indexed (0: nothing written, no clip encoded).
    """
    from avsim.core.safe_json import read_json
    from avsim.models.config import get_config
    from avsim.train.data import BLANK_FILE, ClipSpec
    from avsim.train.encode import write_index

    done = [t for t, r in zip(tasks, results, strict=True) if r.status != ItemStatus.FAILED]
    if not done:
        return 0
    samples = []
    for task in done:
        outputs = read_json(task.out_dir / JOB_JSON, "job").get("outputs", [])
        samples += sorted(f"{task.out_dir.name}/{o}" for o in outputs if str(o).endswith(".safetensors") and o != BLANK_FILE)
    with atomic_output_path(out / BLANK_FILE) as tmp:
        shutil.copyfile(done[0].out_dir / BLANK_FILE, tmp)
    settings = encode_settings(done[0].options)
    cfg = get_config(settings.model)
    spec = ClipSpec(frames=cfg.frames_per_chunk, fps=cfg.model_fps, height_px=cfg.height_px, width_px=cfg.width_px)
    views = _record(done[0].source, str(done[0].options["clip"])).views
    write_index(out, spec, views, samples, settings.index_record())
    return len(samples)
