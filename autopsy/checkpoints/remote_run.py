"""``autopsy run URL``: a run that lives in object storage or on the Hub, analysed where it is.

``stage(url)`` makes a private temporary folder standing for the remote run, for the ordinary
pipeline to read:

- every remote ``*.safetensors`` becomes an empty placeholder file registered in :data:`PLACEHOLDERS`;
  the checkpoint stage (:mod:`.gather`) scans the remote object instead (header and tensor ranges by
  range requests, :mod:`.remote`): checkpoints are never downloaded;
- the run's small side files (logs, ``trainer_state.json``, configs, TensorBoard events, weight
  indexes: anything that is not a weights file) are fetched, each up to :data:`MAX_SIDE_BYTES` and
  :data:`MAX_SIDE_TOTAL` in all; larger ones, and remote torch pickles, are listed as not read.

A URL may name a ``.safetensors`` file, a ``*.safetensors.index.json`` (its shards) or a folder of a
store that can list (``s3://``, ``gs://``, ``hf://org/repo[@rev]/folder``). Problems (the URL
cannot be reached, the ``remote`` extra is missing, a file too large) come back as notes naming
the URL, for the report; only a URL with nothing readable at all is an error.
"""

from __future__ import annotations

import contextlib
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from autopsy.checkpoints.remote import MAX_INDEX_BYTES, Url, _list_fs, open_source, remote_files

#: a side file (log, config, events) larger than this is not fetched
MAX_SIDE_BYTES = 256 * 1024 * 1024
#: all side files of one remote run together
MAX_SIDE_TOTAL = 1024 * 1024 * 1024
#: bytes per read while a side file is copied
COPY_BYTES = 8 * 1024 * 1024
#: placeholder path (str) -> (URL of the remote safetensors file, its size or None, its opened source or None)
PLACEHOLDERS: dict[str, tuple[str, int | None, Any]] = {}
_WEIGHTS = (".safetensors", ".bin", ".pt", ".pth", ".ckpt")


class RemoteRunError(Exception):
    """Nothing of the remote run could be read: the message names the URL and the problem."""


@contextlib.contextmanager
def stage(url: str) -> Iterator[tuple[Path, list[tuple[str, str]]]]:
    """(local folder standing for the run at ``url``, notes [(relative path, problem)]); removed afterwards."""
    tmp = Path(tempfile.mkdtemp(prefix="autopsy-remote-"))
    root = tmp / (Url(url).name.removesuffix(".safetensors").removesuffix(".index.json") or "run")
    root.mkdir()
    mine: list[str] = []
    try:
        notes = _fill(url, root, mine)
        yield root, notes
    finally:
        for p in mine:
            PLACEHOLDERS.pop(p, None)
        shutil.rmtree(tmp, ignore_errors=True)


def _fill(url: str, root: Path, mine: list[str]) -> list[tuple[str, str]]:
    low = url.lower().split("?", 1)[0]
    notes: list[tuple[str, str]] = []
    if low.endswith(".index.json"):
        files, error = remote_files(url)
        if error:
            raise RemoteRunError(error)
        try:
            src = open_source(url)
            if src.size > MAX_INDEX_BYTES:
                raise RemoteRunError(f"{url}: index larger than {MAX_INDEX_BYTES >> 20} MB: not a weights index")
            (root / Url(url).name).write_bytes(bytes(src.read(0, src.size)))
        except RemoteRunError:
            raise
        except Exception as exc:  # noqa: BLE001
            raise RemoteRunError(f"{url}: {type(exc).__name__}: {str(exc)[:200]}") from exc
        for u, size in files:
            _placeholder(root / Url(u).name, u, size, mine)
        return notes
    if low.endswith(".safetensors"):  # opened here: a URL that cannot be read is the command's error
        try:
            src = open_source(url)
        except ImportError as exc:
            raise RemoteRunError(f"{url}: cannot read {url.split('://')[0]}:// URLs ({exc}); pip install 'autopsy-ml[remote]'") from exc
        except FileNotFoundError as exc:
            raise RemoteRunError(f"{url}: not found (no such object at this URL)") from exc
        except Exception as exc:  # noqa: BLE001
            raise RemoteRunError(f"{url}: cannot reach: {type(exc).__name__}: {str(exc)[:200]}") from exc
        _placeholder(root / Url(url).name, url, src.size, mine, src)
        return notes
    if low.endswith(_WEIGHTS):
        raise RemoteRunError(f"{url}: remote torch pickles are not read (only safetensors); download it and run on the file")
    scheme = url.split("://", 1)[0]
    if scheme.lower() in ("http", "https"):
        raise RemoteRunError(f"{url}: an HTTP server cannot be listed; name a .safetensors file or its index, "
                             "or use an s3://, gs:// or hf:// folder")
    try:
        fs, base = _list_fs(url)
        listing = fs.find(base, detail=True)
    except ImportError as exc:
        raise RemoteRunError(f"{url}: cannot read {scheme}:// URLs ({exc}); pip install 'autopsy-ml[remote]'") from exc
    except Exception as exc:  # noqa: BLE001
        raise RemoteRunError(f"{url}: cannot list ({type(exc).__name__}: {str(exc)[:200]})") from exc
    if not listing:
        raise RemoteRunError(f"{url}: nothing found (an empty or missing folder)")
    base = base.rstrip("/")
    fetched = 0
    for path, info in sorted(listing.items()):
        rel = path[len(base):].lstrip("/") if path.startswith(base) else path.rsplit("/", 1)[-1]
        if not rel or ".." in rel.split("/"):
            continue
        size = int(info.get("size") or 0)
        local = root / rel
        local.parent.mkdir(parents=True, exist_ok=True)
        low = rel.lower()
        if low.endswith(".safetensors"):
            _placeholder(local, f"{scheme}://{path}" if "://" not in path else path, size or None, mine)
        elif low.endswith(_WEIGHTS[1:]):
            notes.append((rel, f"{url.rstrip('/')}/{rel}: remote torch pickles are not read (only safetensors)"))
        elif size > MAX_SIDE_BYTES or fetched + size > MAX_SIDE_TOTAL:
            notes.append((rel, f"{url.rstrip('/')}/{rel}: {size:,} bytes, not fetched (side files up to "
                               f"{MAX_SIDE_BYTES >> 20} MB each, {MAX_SIDE_TOTAL >> 20} MB in all)"))
        else:
            try:
                with fs.open(path, "rb") as src, open(local, "wb") as dst:  # streamed: bounded memory
                    shutil.copyfileobj(src, dst, COPY_BYTES)
                fetched += size
            except Exception as exc:  # noqa: BLE001
                notes.append((rel, f"{url.rstrip('/')}/{rel}: cannot fetch ({type(exc).__name__}: {str(exc)[:160]})"))
    return notes


def _placeholder(local: Path, url: str, size: int | None, mine: list[str], source: Any = None) -> None:
    local.parent.mkdir(parents=True, exist_ok=True)
    local.touch()
    PLACEHOLDERS[str(local)] = (url, size, source)
    mine.append(str(local))
