"""Every artifact problem ends with what to do about it.

Readers say what is wrong where they find it; many also say what to do. For the ones that do not,
the pipeline appends the advice for that artifact kind here, so a user reading the report's
artifact table always gets an action, whatever reader wrote the message (the robustness corpus,
tests/make_corpus.py, checks this for every case).
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from autopsy.model import Artifact

#: a message already containing one of these verbs tells the user what to do
ACTION = re.compile(
    r"\b(re-?copy|re-?save|re-?run|re-?download|re-?create|restore|remove|delete|fix|check|use|resume|point autopsy|pass|rename|chmod|"
    r"copy (?:it|its|the)|"
    r"set AUTOPSY_DEBUG|do not|don't|find out|install|upgrade|convert|give)\b", re.IGNORECASE)

_CHECKPOINT = ("re-copy it from the machine that wrote it (or re-save it); resume from another checkpoint if this one "
               "is damaged")
_METRIC_LOG = "check those lines if they held values you need; the rest of the file was used"
_CONFIG = "fix the file (it may have been cut while saving) if its settings matter; the analysis went on without them"
_CONFIG_PARTIAL = "check the file if its settings matter; what could be read was used"

#: kind -> (advice when partly read, advice when unreadable)
ADVICE: dict[str, tuple[str, str]] = {
    "safetensors": (_CHECKPOINT, _CHECKPOINT),
    "torch": (_CHECKPOINT, _CHECKPOINT),
    "weights_index": (("check that every shard was copied next to the index (a shard path outside the run "
                      "directory is never followed: fix the index if it was edited)"),
                      "re-copy the index from the machine that wrote it; the shards were scanned without it"),
    "training_args_bin": ("check that the file was copied whole; settings were taken from the other configs and logs",
                          "check that the file was copied whole; settings were taken from the other configs and logs"),
    "tfevents": (("re-copy the file if it was cut in transfer (a writer killed mid-write also leaves this); "
                 "the other logs were used as well"),
                 "check that this is a TensorBoard event file and re-copy it if it was cut in transfer"),
    "trainer_state": ("use the copy in an earlier checkpoint-*/ directory or the stdout log for the lost part",
                      "use the copy in an earlier checkpoint-*/ directory or the stdout log instead"),
    "swift_jsonl": (_METRIC_LOG, "check that this is the run's metric log; the other artifacts were used"),
    "llamafactory_jsonl": (_METRIC_LOG, "check that this is the run's metric log; the other artifacts were used"),
    "jsonl": (_METRIC_LOG, "check that this is a metric log; the other artifacts were used"),
    "lightning_csv": (_METRIC_LOG, "check that this is Lightning's metrics.csv; the other artifacts were used"),
    "text_log": (_METRIC_LOG, "check that this is the run's log; the other artifacts were used"),
}
_DEFAULT = (_CONFIG_PARTIAL, _CONFIG)
_READER_FAILED = "set AUTOPSY_DEBUG=1 for the traceback and report it; the other artifacts were analysed"


def advice_for(kind: str, status: str, problem: str) -> str:
    if problem.startswith(("reader failed", "checkpoint analysis failed")):
        return _READER_FAILED
    partial, unreadable = ADVICE.get(kind, _DEFAULT)
    return partial if status == "partial" else unreadable


def add_advice(artifacts: Iterable[Artifact]) -> None:
    """Append what to do to each partial/unreadable artifact's problem that does not say it yet."""
    for a in artifacts:
        if a.status not in ("partial", "unreadable") or not a.problem:
            continue
        if a.problem.startswith(("reader failed", "checkpoint analysis failed")) or not ACTION.search(a.problem):
            a.problem = f"{a.problem.rstrip('; .')}; {advice_for(a.kind, a.status, a.problem)}"
