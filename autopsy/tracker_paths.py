"""Where experiment trackers keep a run, recognised from paths alone (used by discovery).

MLflow's file store writes ``<root>/<experiment_id>/<run_id>/meta.yaml`` beside ``metrics/``,
``params/`` and ``tags/`` folders holding one file per key (keys may contain ``/``, which become
sub-folders); newer MLflow keeps the same data in a SQLite ``mlflow.db``. W&B writes
``wandb/run-<date>_<time>-<id>/`` (``offline-run-...`` offline) with ``files/`` (config.yaml,
wandb-summary.json, wandb-metadata.json, output.log, requirements.txt), ``logs/`` (wandb's own
debug logs) and the ``run-<id>.wandb`` record log. Only stdlib here: discovery must stay cheap.
"""

from __future__ import annotations

import re
from pathlib import Path

WANDB_RUN_DIR = re.compile(r"^(?:offline-)?run-\d{8}_\d{6}-[A-Za-z0-9]+$")
_WANDB_FILE = re.compile(r"^run-[A-Za-z0-9]+\.wandb$")
#: files in a W&B run's files/ folder -> kind
WANDB_FILES = {
    "config.yaml": "wandb_config", "wandb-summary.json": "wandb_summary", "wandb-metadata.json": "wandb_metadata",
    "requirements.txt": "requirements", "conda-environment.yaml": "requirements",
}
MLFLOW_PARTS = ("metrics", "params", "tags")
#: how many folders up a file inside an MLflow run may sit (metric keys with several ``/``)
MLFLOW_MAX_KEY_DEPTH = 8


def _is_mlflow_run_dir(d: Path) -> bool:
    try:
        return (d / "meta.yaml").is_file() and any((d / p).is_dir() for p in MLFLOW_PARTS)
    except OSError:
        return False


def tracker_kind(path: Path) -> str | None:
    """The artifact kind of a tracker file, or None when the path is not inside a tracker run."""
    name = path.name
    parent = path.parent
    if _WANDB_FILE.match(name):
        return "wandb_history"
    if name == "requirements.txt":
        return "requirements"  # pinned versions of the run's environment
    if parent.name == "files" and WANDB_RUN_DIR.match(parent.parent.name):
        return WANDB_FILES.get(name)  # output.log and others: classified as usual
    if (WANDB_RUN_DIR.match(parent.name) or parent.name == "wandb") and name.startswith("debug") \
            and name.endswith(".log"):
        return "ignored"
    if parent.name == "logs" and WANDB_RUN_DIR.match(parent.parent.name):
        return "ignored"  # wandb's own debug logs, not the training output
    if name == "meta.yaml":
        return "mlflow_run" if _is_mlflow_run_dir(parent) else None
    for i, d in enumerate(path.parents):
        if i >= MLFLOW_MAX_KEY_DEPTH:
            break
        if d.name in MLFLOW_PARTS and _is_mlflow_run_dir(d.parent):
            return "mlflow_part"  # one metric / param / tag file of the run
    if name.endswith((".db", ".sqlite")) and _is_sqlite(path):
        return "mlflow_db"
    return None


def _is_sqlite(path: Path) -> bool:
    try:
        with open(path, "rb") as fh:
            return fh.read(16) == b"SQLite format 3\x00"
    except OSError:
        return False


def skip_dir(path: Path) -> str | None:
    """Why a folder inside a tracker's tree is not walked, or None to walk it."""
    if path.parent.name == "wandb" and not WANDB_RUN_DIR.match(path.name):
        return "W&B bookkeeping folder (latest-run is a link to a run folder read under its own name)"
    if path.name == "tmp" and WANDB_RUN_DIR.match(path.parent.name):
        return "W&B scratch folder"
    if path.name == ".trash" and path.parent.name == "mlruns":
        return "MLflow's deleted runs"
    return None
