"""Flight recorder: records what a post-mortem needs while a run trains, and stops NaN before it
reaches the weights.

* ``AutopsyCallback`` - a ``transformers.TrainerCallback`` (TRL trainers inherit it);
* ``AutopsyLightningCallback`` - a Lightning ``Callback``;
* ``Recorder`` - a plain object for hand-written, Accelerate or DeepSpeed loops.

Importing this package imports neither torch nor the host framework: each name is loaded on first
use (``import autopsy`` must stay fast). Format: ``docs/record.md``.
"""

from __future__ import annotations

from typing import Any

__all__ = ["AutopsyCallback", "AutopsyLightningCallback", "Recorder"]

_WHERE = {"AutopsyCallback": "autopsy.record.hf", "AutopsyLightningCallback": "autopsy.record.lightning",
          "Recorder": "autopsy.record.core"}


def __getattr__(name: str) -> Any:
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module 'autopsy.record' has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(module), name)
