"""Readers: one per artifact kind. Each ``read(found, builder)`` fills part of the Run and never
raises for bad input (it records a problem instead). The pipeline also isolates readers: one that
raises anyway is recorded as a failed read of that file and the analysis goes on."""

from __future__ import annotations

from collections.abc import Callable

from autopsy.discover import Found
from autopsy.ingest.base import RunBuilder

Reader = Callable[[Found, RunBuilder], None]


#: reader modules, each exporting READERS = {kind: read}
READER_MODULES = ("autopsy.ingest.structured", "autopsy.ingest.textlog", "autopsy.ingest.tensorboard",
                  "autopsy.ingest.mlflow_store", "autopsy.ingest.wandb_run",
                  "autopsy.ingest.columns", "autopsy.ingest.archives",
                  "autopsy.ingest.flight_record",
                  "autopsy.ingest.raytune", "autopsy.ingest.ranks")


def readers(broken: dict[str, str] | None = None) -> dict[str, Reader]:
    """kind -> reader. Each module is imported on its own, so one that fails to import (a bug, a
    missing optional dependency) costs only its kinds: they are recorded in ``broken``
    (module -> reason) and the other readers still run. ``AUTOPSY_DEBUG=1`` re-raises."""
    import importlib

    from autopsy.errors import debug_enabled

    table: dict[str, Reader] = {}
    for name in READER_MODULES:
        try:
            module = importlib.import_module(name)
        except Exception as exc:  # noqa: BLE001 - isolation is the point
            if debug_enabled():
                raise
            if broken is not None:
                broken[name] = f"{type(exc).__name__}: {exc}"[:300]
            continue
        table.update(module.READERS)
    return table
