"""toolscore: scores how well AI agents use their tools, from their OpenTelemetry traces.

The installed package holds three sub-packages: :mod:`toolscore.scorer` (pure scoring),
:mod:`toolscore.storage` (the database layer) and :mod:`toolscore.collector` (the service and
its command line). The Python API (:func:`score_sample`, :func:`score_calls`,
:func:`assert_tool_calls`, :func:`load_metrics`) lives in :mod:`toolscore.api`.
``__version__`` comes from the package metadata, read on first use so that
``toolscore score`` does not pay for :mod:`importlib.metadata` at start-up.
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

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (start-up time)
if TYPE_CHECKING:
    from toolscore.api import (
        Result,
        SampleError,
        ToolCall,
        assert_tool_calls,
        load_metrics,
        score_calls,
        score_sample,
    )

    __version__: str

#: The public API (:mod:`toolscore.api`), imported on first use.
_API = frozenset(
    {
        "Result",
        "SampleError",
        "ToolCall",
        "assert_tool_calls",
        "load_metrics",
        "score_calls",
        "score_sample",
    }
)
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


def __getattr__(name: str) -> object:
    if name == "__version__":
        from importlib.metadata import PackageNotFoundError, version

        try:
            value = version("toolscore")
        except PackageNotFoundError:  # run from a source tree that was never installed
            value = "0+unknown"
        globals()["__version__"] = value
        return value
    if name in _API:
        from toolscore import api

        return getattr(api, name)
    raise AttributeError(f"module 'toolscore' has no attribute {name!r}")
