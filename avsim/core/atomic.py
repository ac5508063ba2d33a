"""Atomic outputs: a writer never leaves a half-written file or folder behind."""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path


@contextlib.contextmanager
def atomic_output_path(path: str | os.PathLike[str], *, is_dir: bool = False) -> Iterator[Path]:
    """Yield a temporary path beside `path`; rename it onto `path` only on success.

    The temporary lives in the same folder, so the final `os.replace` is atomic on POSIX.
    On any exception the temporary is removed and `path` is left as it was. For folders an
    existing target is replaced as a whole (moved aside, then deleted after the rename).
    Suffixes are kept (``x.tmp123.mp4``) so writers that pick a format from the name work.

    Args:
        path: the final file or folder.
        is_dir: whether a folder is written (the temporary is then an empty folder).

    Returns:
        A context manager yielding the temporary path to write.
    """
    final = Path(path)
    final.parent.mkdir(parents=True, exist_ok=True)
    stem, suffix = (final.name, "") if is_dir else (final.stem, final.suffix)
    tmp = Path(tempfile.mkdtemp(prefix=f".{stem}.tmp", suffix=suffix, dir=final.parent))
    if not is_dir:
        tmp.rmdir()  # the writer creates the file itself
    try:
        yield tmp
        if is_dir and final.exists():
            old = final.with_name(f".{final.name}.old{os.getpid()}")
            os.replace(final, old)
            os.replace(tmp, final)
            shutil.rmtree(old, ignore_errors=True)
        else:
            os.replace(tmp, final)
    except BaseException:
        if tmp.is_dir():
            shutil.rmtree(tmp, ignore_errors=True)
        elif tmp.exists():
            tmp.unlink()
        raise
