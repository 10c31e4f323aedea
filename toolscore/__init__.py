"""toolscore: scores how well AI agents use their tools, from their OpenTelemetry traces.

The installed package holds three sub-packages: :mod:`toolscore.scorer` (pure scoring),
:mod:`toolscore.storage` (the database layer) and :mod:`toolscore.collector` (the service and
its command line). The Python API (:func:`score_sample`, :func:`score_calls`,
:func:`assert_tool_calls`, :func:`load_metrics`) lives in :mod:`toolscore.api`; ``__version__``
comes from the package metadata, read on first use.
"""

from __future__ import annotations

import os as _os

# In the source tree toolscore/ sits beside collector/, scorer/ and storage/ (installed, they sit
# inside it): let the sub-packages resolve there too, so the tree imports without installing.
_here = _os.path.dirname(__file__)
_parent = _os.path.dirname(_here)
if not _os.path.isdir(_os.path.join(_here, "collector")) and _os.path.isfile(
    _os.path.join(_parent, "collector", "__init__.py")
):
    __path__.append(_parent)

# (imports after the path set-up above, which they need in a source tree)
from toolscore.api import (  # noqa: E402
    Result,
    SampleError,
    ToolCall,
    assert_tool_calls,
    load_metrics,
    score_calls,
    score_sample,
)


def __getattr__(name: str) -> str:
    # Read on first use: importlib.metadata's search of the installed distributions costs more
    # start-up than anything else a command imports, and only --version needs it.
    if name != "__version__":
        raise AttributeError(f"module 'toolscore' has no attribute {name!r}")
    from importlib.metadata import PackageNotFoundError, version

    try:
        value = version("toolscore")
    except PackageNotFoundError:  # run from a source tree that was never installed
        value = "0+unknown"
    globals()["__version__"] = value
    return value


__all__ = [
    "Result",
    "SampleError",
    "ToolCall",
    "__version__",
    "assert_tool_calls",
    "load_metrics",
    "score_calls",
    "score_sample",
]
