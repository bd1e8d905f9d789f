"""autopsy: post-mortem analysis of failed deep-learning and LLM fine-tuning runs."""

from __future__ import annotations

from typing import Any

__version__ = "0.1.0"

#: the Python API (autopsy/api.py), loaded on first use so `import autopsy` pulls in no pandas
_API = frozenset({"analyze", "sweep", "Analysis"})


def __getattr__(name: str) -> Any:
    if name in _API:
        from autopsy import api

        return getattr(api, name)
    raise AttributeError(f"module 'autopsy' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(list(globals()) + list(_API))
