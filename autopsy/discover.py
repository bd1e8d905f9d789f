"""Find and classify what a run left behind.

The walk is bounded (file count, depth), never follows a directory symlink into a loop, and never
opens more than a small head of a file to classify it. A name that is a format's own (``trainer_state.json``,
``events.out.tfevents.*``, ``*.safetensors``) decides; for text files (logs, ``.jsonl``, ``.csv``,
``.txt``, no extension) the name is only a hint and a sniff of the head decides
(:mod:`autopsy.sniff`): LLaMA-Factory records pasted into ``log.txt`` are read as such.
"""

from __future__ import annotations

import os
import re
import stat
from dataclasses import dataclass
from pathlib import Path

from autopsy.tracker_paths import skip_dir, tracker_kind

#: stop walking after this many entries: a run dir with more is a dataset or a cache dir,
#: and the report says what was skipped.
MAX_ENTRIES = 200_000
MAX_DEPTH = 12
#: at most this many files of the kinds below are read: more is a dataset or cache, not run logs
#: (each costs a full read; real runs have a handful of logs and configs)
MAX_GENERIC_FILES = 500
GENERIC_KINDS = frozenset({"text_log", "jsonl", "json_config", "yaml_config", "metrics_csv", "archive"})
#: bytes read to sniff an unknown file
SNIFF_BYTES = 64 * 1024

SKIP_DIRS = {".git", "__pycache__", "node_modules", ".ipynb_checkpoints", ".cache", "site-packages"}

TEXT_LOG_EXT = {".log", ".txt", ".out", ".err", ".stdout", ".stderr"}
TORCH_EXT = {".bin", ".pt", ".pth", ".ckpt"}
IGNORED_NAMES = {
    "tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "vocab.json", "merges.txt",
    "generation_config.json", "chat_template.jinja", "tokenizer.model", "added_tokens.json", "latest",
    "zero_to_fp32.py", "zero_to_torch.py", "README.md", "preprocessor_config.json",
}
_METRIC_SNIFF = re.compile(
    rb"(loss|grad_norm|learning_rate|\blr\b|OVERFLOW|Traceback|Error|Epoch|step)", re.IGNORECASE)
_TFEVENTS = re.compile(r"events\.out\.tfevents\.")
_RESULTS = re.compile(r"^(all|train|eval|test|predict)_results\.json$")


@dataclass
class Found:
    path: Path
    kind: str
    size: int


@dataclass
class Discovery:
    files: list[Found]
    skipped: list[tuple[Path, str]]  # (path, reason) for entries not looked at
    truncated: bool = False


def classify(path: Path, size: int) -> str:
    """Artifact kind from the file name, and for ambiguous names from a content sniff."""
    name = path.name
    low = name.lower()
    tracker = tracker_kind(path)  # MLflow / W&B run layouts (autopsy/tracker_paths.py)
    if tracker is not None:
        return tracker
    if _TFEVENTS.search(name):
        return "tfevents"
    if low == "trainer_state.json":
        return "trainer_state"
    if low in ("result.json", "params.json", "progress.csv") and (path.parent / "params.json").is_file():
        return {"result.json": "raytune_result", "params.json": "raytune_params"}.get(low, "raytune_progress")  # Ray Tune trial
    if _RESULTS.match(low):
        return "results_json"
    if path.parent.name == "autopsy-record" and (low.endswith(".jsonl") or low.startswith("batch-step")):
        return "autopsy_record" if low.endswith(".jsonl") else "ignored"  # autopsy.record (docs/record.md)
    if low == "metrics.csv":
        return "lightning_csv"
    if low == "hparams.yaml":
        return "hparams_yaml"
    if low == "adapter_config.json":
        return "adapter_config"
    if low == "config.json":
        return "model_config"
    if low == "args.json":
        return "args_json"
    if low in ("training_args.yaml", "train_args.yaml", "training_args.yml"):
        return "args_yaml"
    if low == "training_args.bin":
        return "training_args_bin"
    if low.endswith(".safetensors.index.json") or low.endswith(".bin.index.json"):
        return "weights_index"
    if low.endswith(".safetensors"):
        return "safetensors"
    if name in IGNORED_NAMES:
        return "ignored"
    if low == "error.json" and path.parent.name.isdigit() and path.parent.parent.name.startswith("attempt_"):
        return "elastic_error"  # torchrun --log-dir: attempt_<N>/<local_rank>/error.json (autopsy.ingest.ranks)
    if low.endswith(ARCHIVE_SUFFIXES):
        return "archive"  # read through autopsy.ingest.archives (bounded, streamed unpacking)
    hinted = _NAME_HINTS.get(low) or (_SUFFIX_HINTS.get(path.suffix.lower()) if path.suffix else "text_log")
    if hinted is not None:
        return _by_content(path, hinted)
    suffix = path.suffix.lower()
    if suffix in TORCH_EXT:
        return "torch"
    if suffix in (".yaml", ".yml"):
        return "yaml_config"
    if suffix in (".png", ".jpg", ".jpeg", ".gif", ".svg", ".pdf", ".html", ".npy", ".npz", ".parquet",
                  ".arrow", ".msgpack", ".h5", ".onnx", ".gguf", ".pkl"):
        return "ignored"
    if suffix in TEXT_LOG_EXT or low in ("debug.log", "running_log.txt", "stdout", "stderr", "nohup.out"):
        return "text_log"
    if suffix in (".py", ".sh", ".md", ".toml", ".cfg", ".ini", ".jinja", ".model"):
        return "ignored"
    # extension-less or unknown: sniff the head
    return "text_log" if _looks_like_log(path) else "ignored"


#: names and suffixes whose content decides the kind; the value is the kind the name suggests
_NAME_HINTS = {"logging.jsonl": "swift_jsonl", "trainer_log.jsonl": "llamafactory_jsonl", "debug.log": "text_log",
               "running_log.txt": "text_log", "stdout": "text_log", "stderr": "text_log", "nohup.out": "text_log"}
_SUFFIX_HINTS = {**{ext: "text_log" for ext in TEXT_LOG_EXT}, ".jsonl": "jsonl", ".csv": "metrics_csv",
                 ".tsv": "metrics_csv", ".md": "text_log", ".json": "json_config"}


#: names read through autopsy.ingest.archives (.tar.gz and .tar.bz2 end in .gz and .bz2)
ARCHIVE_SUFFIXES = (".gz", ".zip", ".tar", ".tgz", ".tbz", ".tbz2", ".txz", ".bz2", ".xz")
_BZ2_HEAD = re.compile(rb"BZh[1-9]1AY&SY")


def looks_archived(head: bytes) -> bool:
    """gzip, zip, bzip2 or xz magic at the start, or a tar header (``ustar`` at byte 257)."""
    return (head.startswith((b"\x1f\x8b", b"PK\x03\x04", b"\xfd7zXZ\x00")) or bool(_BZ2_HEAD.match(head))
            or head[257:262] == b"ustar")


def _by_content(path: Path, hinted: str) -> str:
    """The kind the head of the file shows; the hint when the head cannot be read. A file with no
    training content in its head (a README, a dataset dump) keeps the old rule: a log only when it
    mentions a metric or an error."""
    from autopsy.sniff import sniff_text

    try:
        with open(path, "rb") as fh:
            head = fh.read(SNIFF_BYTES)
            complete = len(head) < SNIFF_BYTES or not fh.read(1)
    except OSError:
        return hinted  # the reader reports the unreadable file
    if looks_archived(head):
        return "archive"  # a gzip/bz2/xz/zip/tar under a log's name (or none): stdin, a renamed attachment
    kind = sniff_text(head, complete)
    if hinted == "json_config":  # DeepSpeed config, other json: the config reader decides, unless it is a log
        return kind if kind in ("trainer_state", "llamafactory_jsonl", "swift_jsonl") else hinted
    if kind is None:
        return hinted if head else "ignored" if hinted not in ("text_log", "metrics_csv") else hinted
    if kind == "text_log" and hinted in ("jsonl", "swift_jsonl", "llamafactory_jsonl"):
        return hinted  # a .jsonl whose head is not JSON: its reader says what is wrong with it
    if kind == "text_log" and hinted == "metrics_csv":
        return "text_log" if _METRIC_SNIFF.search(head) else "ignored"
    if kind == "text_log" and path.suffix.lower() == ".md" and not _METRIC_SNIFF.search(head):
        return "ignored"
    if kind == "text_log" and not path.suffix and not (_METRIC_SNIFF.search(head) or _mostly_text(head)):
        return "ignored"
    return kind


#: share of a head's characters that may be undecodable or control characters in a text file
_JUNK_SHARE = 0.01


def _mostly_text(head: bytes) -> bool:
    """A paste with no metric word in its head (only an error message) is still a log, if it is text."""
    text = head.decode("utf-8", "replace")
    junk = text.count("\ufffd") + sum(1 for ch in text if ch < " " and ch not in "\t\n\r\x1b\x0c")
    return junk <= len(text) * _JUNK_SHARE


def _looks_like_log(path: Path) -> bool:
    try:
        with open(path, "rb") as fh:
            head = fh.read(SNIFF_BYTES)
    except OSError:
        return False
    if not head:
        return False
    if head.count(b"\x00") > len(head) // 100:
        return False
    return bool(_METRIC_SNIFF.search(head))


def discover(root: Path, max_entries: int = MAX_ENTRIES, max_depth: int = MAX_DEPTH) -> Discovery:
    """Walk ``root`` (a directory or a single file) and classify each regular file."""
    files: list[Found] = []
    skipped: list[tuple[Path, str]] = []
    if root.is_file():
        try:
            size = root.stat().st_size
        except OSError as exc:
            skipped.append((root, f"cannot stat: {exc.strerror or exc}"))
            return Discovery(files, skipped)
        kind = classify(root, size)
        if kind == "ignored" and root.suffix.lower() not in TORCH_EXT:
            kind = "text_log"  # a file the user pointed at is read as a log whatever its name
        files.append(Found(root, kind, size))
        return Discovery(files, skipped)

    seen_dirs: set[tuple[int, int]] = set()
    count = 0
    truncated = False
    stack: list[tuple[Path, int]] = [(root, 0)]
    while stack:
        d, depth = stack.pop()
        try:
            st = os.stat(d)
        except OSError as exc:
            skipped.append((d, f"cannot open directory: {exc.strerror or exc}; check that it exists and is readable (chmod +rx)"))
            continue
        ident = (st.st_dev, st.st_ino)
        if ident in seen_dirs:
            skipped.append((d, "symbolic link to a directory already read (a symlink loop): not walked again; "
                               "remove the link if it is a mistake"))
            continue
        seen_dirs.add(ident)
        try:
            entries = sorted(os.scandir(d), key=lambda e: e.name)
        except OSError as exc:
            skipped.append((d, f"cannot list directory: {exc.strerror or exc}; check its permissions (chmod +rx)"))
            continue
        subdirs = []
        for entry in entries:
            count += 1
            if count > max_entries:
                truncated = True
                break
            p = Path(entry.path)
            try:
                is_dir = entry.is_dir(follow_symlinks=True)
            except OSError:
                is_dir = False
            if is_dir:
                if entry.name in SKIP_DIRS:
                    skipped.append((p, "not a run directory (skipped by name)"))
                elif (why := skip_dir(p)) is not None:
                    skipped.append((p, why))
                elif depth + 1 > max_depth:
                    skipped.append((p, f"deeper than {max_depth} levels"))
                else:
                    subdirs.append((p, depth + 1))
                continue
            try:
                est = entry.stat(follow_symlinks=True)
            except OSError as exc:
                skipped.append((p, _stat_problem(entry, exc)))
                continue
            if not stat.S_ISREG(est.st_mode):
                skipped.append((p, "not a regular file (a FIFO, socket or device): not opened, so autopsy cannot "
                                   "block on it; copy its content into a regular file to include it"))
                continue
            files.append(Found(p, classify(p, est.st_size), est.st_size))
        if truncated:
            skipped.append((d, f"stopped after {max_entries} entries; the rest was not read"))
            break
        stack.extend(reversed(subdirs))
    files = _cap_generic(root, files, skipped)
    files.sort(key=lambda f: str(f.path))
    return Discovery(files, skipped, truncated)


def _cap_generic(root: Path, files: list[Found], skipped: list[tuple[Path, str]]) -> list[Found]:
    """Keep the MAX_GENERIC_FILES log/config-like files nearest the root; the rest are skipped with
    one entry per directory (a dataset dumped into the output dir must not cost a read per file)."""
    generic = [f for f in files if f.kind in GENERIC_KINDS]
    if len(generic) <= MAX_GENERIC_FILES:
        return files
    generic.sort(key=lambda f: (len(f.path.parts), str(f.path)))
    dropped = generic[MAX_GENERIC_FILES:]
    per_dir: dict[Path, int] = {}
    for f in dropped:
        per_dir[f.path.parent] = per_dir.get(f.path.parent, 0) + 1
    for d, n in sorted(per_dir.items()):
        skipped.append((d, f"{n} log/config-like file(s) not read: the run holds {len(generic)}, more than "
                           f"{MAX_GENERIC_FILES} (a dataset or cache?); the {MAX_GENERIC_FILES} nearest the run root "
                           "were read; point autopsy at this directory or a file in it to read them"))
    drop = {id(f) for f in dropped}
    return [f for f in files if id(f) not in drop]


def _stat_problem(entry: os.DirEntry, exc: OSError) -> str:
    """Why a directory entry could not be looked at, and what to do about it."""
    if entry.is_symlink():
        try:
            target = os.readlink(entry.path)
        except OSError:
            target = "?"
        return (f"broken symbolic link (to {target!r}: {exc.strerror or exc}): not read; "
                "restore its target or remove the link")
    return f"cannot stat ({exc.strerror or exc}): not read; check the file and its permissions"


_STEP_DIR = re.compile(r"(?:checkpoint|global_step|step|iter|ckpt)[-_]?(\d+)$", re.IGNORECASE)


def step_of_dir(name: str) -> int | None:
    """Step number from a checkpoint directory name (checkpoint-40, global_step40)."""
    m = _STEP_DIR.search(name)
    return int(m.group(1)) if m else None
