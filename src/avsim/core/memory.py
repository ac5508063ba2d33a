"""Handing freed heap memory back to the operating system (glibc), for long-lived render workers.

Large numpy temporaries (a 1080p ray map is built from several 30-50 MB arrays) are served by
glibc from the heap once its dynamic mmap threshold has grown, and their pages stay resident
after they are freed. `release_free_heap` asks glibc to return them (`malloc_trim(0)`), so the
resident size that follows is what the process still uses. Elsewhere (other C libraries) it
does nothing.
"""

from __future__ import annotations

import ctypes
from functools import lru_cache
from typing import Any


@lru_cache(maxsize=1)
def _libc_trim() -> Any:
    """glibc's `malloc_trim`, or None where the C library has none."""
    try:  # the C library this process already runs on (no search, no subprocess)
        return ctypes.CDLL(None).malloc_trim
    except (OSError, AttributeError, TypeError):
        return None


def release_free_heap() -> bool:
    """Return the heap's free pages to the operating system (glibc `malloc_trim(0)`).

    Returns:
        True when glibc released memory, False when nothing was released or there is no glibc.
    """
    trim = _libc_trim()
    return bool(trim(0)) if trim is not None else False
