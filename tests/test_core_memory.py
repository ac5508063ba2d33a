"""avsim.core.memory: freed heap pages go back to the OS (glibc), and the call is safe elsewhere."""

from __future__ import annotations

import platform

import numpy as np
import pytest

from avsim.core.memory import release_free_heap


def _rss_mib() -> float:
    with open("/proc/self/status", encoding="ascii") as fh:
        return int(fh.read().split("VmRSS:")[1].split()[0]) / 1024


@pytest.mark.skipif(platform.system() != "Linux" or not platform.libc_ver()[0].startswith("glibc"), reason="glibc only")
def test_freed_heap_temporaries_are_returned() -> None:
    keep = [np.ones(4_000_000 // 8) for _ in range(3)]  # raise glibc's mmap threshold: later 4 MB blocks come from the heap
    del keep
    blocks = [np.ones(3_000_000 // 8) for _ in range(60)]  # ~180 MB of heap blocks, touched
    blocks = blocks[-1:]  # free all but the last one (it pins the heap top)
    before = _rss_mib()
    released = release_free_heap()
    assert released and _rss_mib() < before - 50.0
    assert float(blocks[0].sum()) == 3_000_000 // 8


def test_release_is_harmless_when_nothing_is_free() -> None:
    release_free_heap()
    assert isinstance(release_free_heap(), bool)
