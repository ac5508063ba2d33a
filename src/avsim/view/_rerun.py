"""rerun-sdk, imported lazily: avsim works without it; the viewer says how to install it."""

from __future__ import annotations

from types import ModuleType

from avsim.core.errors import AvsimError

RERUN_VERSION = "0.41.0"
INSTALL_HINT = f"pip install 'avsim[view]' && pip install --no-deps rerun-sdk=={RERUN_VERSION}"


class ViewerUnavailableError(AvsimError):
    """rerun-sdk is missing (or of another release): one line naming the `view` extra."""


def require_rerun() -> ModuleType:
    """Import rerun-sdk.

    Returns:
        The `rerun` module.

    Raises:
        ViewerUnavailableError: it is not installed, or its release is not `RERUN_VERSION`'s.
    """
    try:
        import rerun
    except ImportError:
        raise ViewerUnavailableError(f"the viewer needs the `view` extra (rerun-sdk {RERUN_VERSION}): {INSTALL_HINT}") from None
    version = str(getattr(rerun, "__version__", ""))
    if version.split(".")[:2] != RERUN_VERSION.split(".")[:2]:
        raise ViewerUnavailableError(f"the viewer needs rerun-sdk {RERUN_VERSION}, found {version or 'unknown'}: {INSTALL_HINT}")
    return rerun
