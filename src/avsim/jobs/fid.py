"""FID (and FVD) over a dataset in tasks: per-clip features in the tasks, Gaussian statistics
merged on the driver.

Each eval item is one clip; its task runs the existing extractor
(`avsim.evaluation.features.fid_clip_features` with `load_fid_inception`) and writes the clip's
feature rows `features.npy (T, 2048)` float64. The driver folds the clips one at a time into
a `RunningGaussian` per side (count, mean, centred scatter, float64, merged with Chan's
pairwise update, which avoids the cancellation of "sum of outer products minus n mu mu^T"), so
memory is O(D^2) whatever the number of clips. While a side has fewer rows than dimensions its
rows are kept too (then they take less memory than the scatter): the one-process code computes
that case in sample space and the merged result must equal it.

The distance is `avsim.evaluation.frechet` code on the merged statistics: equal to
`avsim eval fid` on the same clips to ~1e-12 relative (tests/test_jobs.py checks 1e-9). One case
is ill-conditioned for any method: one side below D rows, the other at or above D; the square
root of the rank-deficient covariance's near-zero eigenvalues then magnifies rounding, and the
two computations agree only to ~1e-8 (the result carries the rank warning anyway).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, get_args

import numpy as np

from avsim.core.errors import AvsimInputError
from avsim.jobs.tasks import ItemTask

if TYPE_CHECKING:
    from rich.console import Console

FEATURES_NPY = "features.npy"
FID_DIM = 2048
FVD_DIM = 400


class RunningGaussian:
    """Count, mean `(D,)` and centred scatter `(D, D)` of feature rows added in blocks, float64."""

    def __init__(self, dim: int) -> None:
        """Args:
        dim: the feature dimension D.
        """
        self.dim = dim
        self.count = 0
        self.mean = np.zeros(dim, np.float64)
        self.scatter = np.zeros((dim, dim), np.float64)
        self.rows: list[np.ndarray] | None = []  # kept while count < dim

    def add(self, block: np.ndarray) -> None:
        """Fold feature rows `block (T, D)` in (Chan et al.'s pairwise update).

        Args:
            block: the rows of one clip.
        """
        x = np.asarray(block, dtype=np.float64)
        if x.ndim != 2 or x.shape[1] != self.dim:
            raise AvsimInputError("features", "shape", f"expected (T, {self.dim}), got {x.shape}")
        n_b = x.shape[0]
        if n_b == 0:
            return
        mean_b = x.mean(axis=0)
        centred = x - mean_b
        scatter_b = centred.T @ centred
        n_a, n = self.count, self.count + n_b
        delta = mean_b - self.mean
        self.mean = self.mean + delta * (n_b / n)
        self.scatter = self.scatter + scatter_b + np.outer(delta, delta) * (n_a * n_b / n)
        self.count = n
        if self.rows is not None:
            self.rows.append(x)
            if self.count >= self.dim:
                self.rows = None

    def stats(self, covariance_norm: str) -> Any:
        """The fitted Gaussian under a covariance normaliser.

        Args:
            covariance_norm: "unbiased_n_minus_1" or "biased_n".

        Returns:
            An `avsim.evaluation.frechet.GaussianStats`.
        """
        from avsim.evaluation.frechet import GaussianStats

        ddof = 1 if covariance_norm == "unbiased_n_minus_1" else 0
        return GaussianStats(self.mean, self.scatter / (self.count - ddof), self.count, covariance_norm)


def merged_frechet(a: RunningGaussian, b: RunningGaussian, covariance_norm: str) -> float:
    """The Frechet distance of two merged sides, as `frechet_distance_features` of their rows gives it.

    Args:
        a, b: the two sides (at least 2 rows each).
        covariance_norm: the covariance normaliser.

    Returns:
        The distance.
    """
    from avsim.evaluation.frechet import frechet_distance_features, frechet_distance_stats

    if a.rows is not None and b.rows is not None:  # both below D rows: the sample-space form, as one process
        return frechet_distance_features(np.concatenate(a.rows), np.concatenate(b.rows), covariance_norm)  # type: ignore[arg-type]
    return frechet_distance_stats(a.stats(covariance_norm), b.stats(covariance_norm))


def write_clip_features(clip: Path, out: Path, options: Mapping[str, Any]) -> None:
    """Compute one clip's features with the existing extractor and write `out/features.npy`.

    Args:
        clip: a video file or a frame folder.
        out: the item's (temporary) output folder.
        options: `metric` ("fid": Inception frames `(T, 2048)`, or "fvd": I3D 16-frame windows
            `(W, 400)`), `weights` (None: the installed ones), `max_frames`, `batch_size` (FID),
            `stride`, `max_windows` (FVD), `cache` (the feature cache `avsim eval fid|fvd --cache` uses).
    """
    from avsim.evaluation.features import FeatureCache, fid_clip_features, fvd_clip_features
    from avsim.jobs.progress import current_item

    item = current_item()
    cache = FeatureCache(options.get("cache"))
    item("loading the network")
    if options.get("metric", "fid") == "fvd":
        from avsim.evaluation.i3d import load_i3d

        i3d, source = load_i3d(options.get("weights"))
        (features,) = fvd_clip_features([clip], i3d, source, 16, int(options.get("stride", 16)), options.get("max_windows"), cache=cache,
                                        progress=item)  # fmt: skip
    else:
        from avsim.evaluation.inception import load_fid_inception

        inception, source = load_fid_inception(options.get("weights"))
        (features,) = fid_clip_features([clip], inception, source, int(options.get("batch_size", 16)), options.get("max_frames"),
                                        cache=cache, progress=item)  # fmt: skip
    with (out / FEATURES_NPY).open("wb") as stream:
        np.save(stream, np.ascontiguousarray(features, dtype=np.float64), allow_pickle=False)


def fold_side(folders: list[Path], dim: int, on_clip: Callable[[], None] | None = None) -> RunningGaussian:
    """Merge the features of one side's clips, one clip in memory at a time.

    Args:
        folders: the item folders (each holding `features.npy`), in clip order.
        dim: the feature dimension (2048 FID, 400 FVD).
        on_clip: called after each clip (progress).

    Returns:
        The side's running Gaussian.
    """
    side = RunningGaussian(dim)
    for folder in folders:
        side.add(np.load(folder / FEATURES_NPY, allow_pickle=False))
        if on_clip is not None:
            on_clip()
    return side


@dataclass(frozen=True)
class ClipBootstrap:
    """The bootstrap over clips of `avsim run eval fid|fvd`: the defaults are `avsim eval report`'s
    (`avsim.evaluation.report.ReportConfig`)."""

    n_resamples: int = 1000
    level: float = 0.95
    seed: int = 0

    def __post_init__(self) -> None:
        if isinstance(self.n_resamples, bool) or not isinstance(self.n_resamples, int) or self.n_resamples < 1:
            raise AvsimInputError("options", "--n-resamples", f"expected an integer >= 1, got {self.n_resamples!r}")
        if not 0.0 < float(self.level) < 1.0:
            raise AvsimInputError("options", "--level", f"expected a number in (0, 1), got {self.level!r}")
        if isinstance(self.seed, bool) or not isinstance(self.seed, int) or self.seed < 0:
            raise AvsimInputError("options", "--seed", f"expected an integer >= 0, got {self.seed!r}")


def clip_intervals(real: list[Path], generated: list[Path], bootstrap: ClipBootstrap) -> dict[str, dict[str, Any]]:
    """The Frechet distance's bootstrap interval over clips, as `avsim eval report` computes it.

    The driver holds every clip's feature rows here (2048 float64 per FID frame, 400 per FVD
    window), never video.

    Args:
        real, generated: the item folders of each side (each holding `features.npy (T, D)`).
        bootstrap: resamples, level and seed.

    Returns:
        Per covariance normaliser, the interval's dict (`estimate`, `ci_low`, `ci_high`, `level`,
        `n_resamples`, `resampling_unit` "clip", `n_units`, `seed`, `note` when n/a).
    """
    from avsim.evaluation.frechet import CovarianceNorm
    from avsim.evaluation.report_video import frechet_interval_over_clips

    fr = [np.load(folder / FEATURES_NPY, allow_pickle=False) for folder in real]
    fg = [np.load(folder / FEATURES_NPY, allow_pickle=False) for folder in generated]
    b = bootstrap
    return {norm: frechet_interval_over_clips(fr, fg, norm, b.n_resamples, b.level, b.seed).as_dict()
            for norm in get_args(CovarianceNorm)}  # fmt: skip


def _describe(metric: str, weights: str | None) -> dict[str, Any]:
    if metric == "fvd":
        from avsim.evaluation.i3d import describe as describe_i3d
        from avsim.evaluation.weights import read_i3d_weights

        return describe_i3d(weights or read_i3d_weights(None)[1])
    from avsim.evaluation.inception import describe as describe_inception
    from avsim.evaluation.weights import find_inception_torchscript

    return describe_inception(weights or str(find_inception_torchscript()), "pytorch_fid")


def frechet_document(real: list[Path], generated: list[Path], options: Mapping[str, Any],
                     on_clip: Callable[[], None] | None = None) -> dict[str, Any]:  # fmt: skip
    """The FID (or FVD) over two sides' item folders, shaped as `avsim eval fid|fvd` writes it.

    Args:
        real, generated: the item folders of each side.
        options: the eval options (`metric`, `weights`).
        on_clip: called after each clip is merged (progress).

    Returns:
        JSON-ready: metric, fid|fvd (both normalisers), frames|windows, clips, features, warnings.
    """
    from avsim.evaluation.frechet import CovarianceNorm, rank_warning

    metric = str(options.get("metric", "fid"))
    dim, rows = (FVD_DIM, "windows") if metric == "fvd" else (FID_DIM, "frames")
    a, b = fold_side(real, dim, on_clip), fold_side(generated, dim, on_clip)
    for side, acc in (("real", a), ("generated", b)):
        if acc.count < 2:
            raise AvsimInputError(side, "clips", f"need at least two {rows} per side, got {acc.count}")
    values = {norm: merged_frechet(a, b, norm) for norm in get_args(CovarianceNorm)}
    warnings = [w for w in [rank_warning(metric.upper(), a.count, b.count, dim)] if w]
    return {"metric": "FID" if metric == "fid" else "FVD (TF-Hub I3D)", metric: values,
            rows: {"real": a.count, "generated": b.count}, "clips": {"real": len(real), "generated": len(generated)},
            "features": _describe(metric, options.get("weights")), "merge": "per-clip features in tasks; count, mean, "
            "centred scatter merged on the driver (float64)", "warnings": warnings}  # fmt: skip


def merge_eval(out: Path, tasks: list[ItemTask], console: Console | None, bootstrap: ClipBootstrap | None = None) -> dict[str, Any]:
    """Merge the eval tasks' per-clip features on the driver and write `out/fid.json` (`fvd.json`).

    Args:
        out: the job's output folder.
        tasks: the eval tasks (all done or skipped), each in `out/<side>/<clip>`.
        console: where the merge's progress bar goes (None: none).
        bootstrap: the interval over clips, under the document's "bootstrap" (None: none).

    Returns:
        The FID / FVD document.
    """
    from avsim.core.progress import progress_bar
    from avsim.evaluation.results import write_json

    folders = {side: [t.out_dir for t in tasks if t.out_dir.parent.name == side] for side in ("real", "generated")}
    metric = str(tasks[0].options.get("metric", "fid"))
    if console is None:
        doc = frechet_document(folders["real"], folders["generated"], tasks[0].options)
    else:
        with progress_bar(f"run eval: merge {metric} statistics", unit="items", console=console) as bar:
            task = bar.add_task("", total=len(tasks))
            doc = frechet_document(folders["real"], folders["generated"], tasks[0].options, lambda: bar.advance(task))
    if bootstrap is not None:
        if console is None:
            doc["bootstrap"] = clip_intervals(folders["real"], folders["generated"], bootstrap)
        else:
            with console.status(f"eval: bootstrap over clips ({min(bootstrap.n_resamples, 200)} resamples)"):
                doc["bootstrap"] = clip_intervals(folders["real"], folders["generated"], bootstrap)
    write_json(doc, out / f"{metric}.json")
    return doc

