"""Reader for compressed logs and attachments: ``train.log.gz``, ``logs.zip`` (a GitHub issue
attachment), read as if their members lay in the run directory.

Members are unpacked into a private temporary directory, classified like any other file
(:func:`autopsy.discover.classify`, content first) and handed to their kind's reader; the report
names them ``logs.zip/rank0.log`` (``builder.aliases``). Untrusted input, so everything is bounded:
bytes written per member and per archive (a zip bomb stops at the cap, with a message), member
count, and no nesting (an archive inside an archive is named, not opened). Member names never
become paths outside the temporary directory. Checkpoints inside archives are not unpacked.
"""

from __future__ import annotations

import re
import shutil
import tempfile
import zipfile
import zlib
from pathlib import Path, PurePosixPath

from autopsy.discover import Found, classify
from autopsy.ingest.base import RunBuilder

KIND = "archive"
#: decompressed bytes read from one member (a log bigger than this is read up to here)
MAX_MEMBER_BYTES = 1 << 30
#: decompressed bytes written per archive in all: a zip bomb stops here
MAX_ARCHIVE_BYTES = 2 << 30
#: members looked at per zip (an attachment of logs has a handful; more is a dataset)
MAX_MEMBERS = 2000
_COPY_BLOCK = 1 << 20
_ARCHIVE_NAME = re.compile(r"\.(?:zip|gz|tgz|tar|bz2|xz|7z|rar|zst)$", re.IGNORECASE)
#: member kinds not unpacked (weights: too big to copy, and the checkpoint stage reads files in place)
_NOT_UNPACKED = {"safetensors", "torch", "training_args_bin", "ignored"}


def is_archive(head: bytes) -> bool:
    """gzip or zip magic at the start of a file."""
    return head.startswith(b"\x1f\x8b") or head.startswith(b"PK\x03\x04")


def read_archive(found: Found, builder: RunBuilder) -> None:
    src = builder.rel(found.path)
    try:
        with open(found.path, "rb") as fh:
            magic = fh.read(4)
    except OSError as exc:
        builder.problem(src, KIND, f"cannot open: {exc.strerror or exc}")
        return
    tmp = Path(tempfile.mkdtemp(prefix="autopsy-unpack-"))
    try:
        if magic.startswith(b"\x1f\x8b"):
            _read_gzip(found, builder, src, tmp)
        elif magic.startswith(b"PK"):
            _read_zip(found, builder, src, tmp)
        else:
            builder.problem(src, KIND, "named like an archive but not gzip or zip data (tar, bz2, xz, 7z and rar are "
                            "not read): unpack it and point autopsy at the files", "ignored")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _member_name(archive_name: str) -> str:
    name = archive_name[:-3] if archive_name.lower().endswith(".gz") else archive_name
    if name.lower().endswith(".tgz"):
        name = name[:-4] + ".tar"
    return name or "member"


def _read_gzip(found: Found, builder: RunBuilder, src: str, tmp: Path) -> None:
    inner = _member_name(found.path.name)
    if _ARCHIVE_NAME.search(inner):
        builder.problem(src, KIND, f"holds another archive ({inner}): nested archives are not opened; unpack it "
                        "and point autopsy at the files", "ignored")
        return
    dest = tmp / "0" / _safe(inner)
    dest.parent.mkdir(parents=True)
    try:
        with open(found.path, "rb") as fin, open(dest, "wb") as fout:
            capped, damage = _gunzip(fin, fout, MAX_MEMBER_BYTES)
    except OSError as exc:
        builder.problem(src, KIND, f"cannot read: {exc.strerror or exc}")
        return
    if damage:
        # a truncated .gz still yields what came before the cut
        builder.problem(src, KIND, f"gzip data is damaged or cut ({damage}); what came before the damage was read",
                        "partial")
    if capped:
        builder.problem(src, KIND, f"decompresses to more than {MAX_MEMBER_BYTES >> 20} MiB: only the first "
                        f"{MAX_MEMBER_BYTES >> 20} MiB were read", "partial")
    _dispatch(builder, dest, src, src)  # the .gz is the log: its points and problems are named after it


def _read_zip(found: Found, builder: RunBuilder, src: str, tmp: Path) -> None:
    try:
        zf = zipfile.ZipFile(found.path)
    except (zipfile.BadZipFile, OSError, ValueError) as exc:
        builder.problem(src, KIND, f"not a readable zip file ({exc}); re-download or re-create the attachment")
        return
    total = 0
    skipped: list[str] = []
    with zf:
        infos = [i for i in zf.infolist() if not i.is_dir()]
        if len(infos) > MAX_MEMBERS:
            builder.problem(src, KIND, f"{len(infos)} members: only the first {MAX_MEMBERS} were looked at", "partial")
            infos = infos[:MAX_MEMBERS]
        for n, info in enumerate(infos):
            name = info.filename
            if _ARCHIVE_NAME.search(name):
                skipped.append(f"{name} (an archive inside the archive: not opened)")
                continue
            if info.flag_bits & 0x1:
                skipped.append(f"{name} (encrypted)")
                continue
            if classify(Path(name), info.file_size) in ("safetensors", "torch") or \
                    PurePosixPath(name).name.startswith("."):
                continue
            if total >= MAX_ARCHIVE_BYTES:
                skipped.append(f"{name} (the archive's {MAX_ARCHIVE_BYTES >> 20} MiB budget was used up)")
                continue
            dest = tmp / str(n) / _safe(name)
            dest.parent.mkdir(parents=True, exist_ok=True)
            cap = min(MAX_MEMBER_BYTES, MAX_ARCHIVE_BYTES - total)
            try:
                with zf.open(info) as fin, open(dest, "wb") as fout:
                    written, capped = _copy(fin, fout, cap)
            except (zipfile.BadZipFile, OSError, EOFError, zlib.error, NotImplementedError, RuntimeError) as exc:
                skipped.append(f"{name} (cannot be unpacked: {type(exc).__name__}: {exc})")
                continue
            total += written
            alias = f"{src}/{name}"
            if capped:
                builder.problem(alias, KIND, f"decompresses to more than {cap >> 20} MiB (a zip bomb?): only the "
                                f"first {cap >> 20} MiB were read", "partial")
            _dispatch(builder, dest, alias, src)
    if skipped:
        builder.problem(src, KIND, f"{len(skipped)} member(s) not read: " + "; ".join(skipped[:5])[:600], "partial")


def _gunzip(fin, fout, cap: int) -> tuple[bool, str | None]:  # noqa: ANN001 - binary file objects
    """Decompress gzip member(s) incrementally, so a cut stream still yields all it held.
    Returns (whether the cap cut it, what was wrong with the data or None)."""
    d = zlib.decompressobj(16 + zlib.MAX_WBITS)
    written = 0
    fed = False  # has the current member been fed any byte (a fresh decompressor after the last member has not)
    while True:
        raw = fin.read(_COPY_BLOCK)
        if not raw:
            break
        while raw:
            fed = True
            try:
                out = d.decompress(raw, cap - written + 1)
            except zlib.error as exc:
                return False, f"zlib: {exc}"
            if written + len(out) > cap:
                fout.write(out[:cap - written])
                return True, None
            fout.write(out)
            written += len(out)
            raw = d.unconsumed_tail
            if d.eof:  # a second gzip member may follow (cat a.gz b.gz)
                rest = d.unused_data + raw
                raw = rest if rest.strip(b"\x00") else b""
                d = zlib.decompressobj(16 + zlib.MAX_WBITS)
                fed = False
    if fed and not d.eof:
        return False, "the stream ends before the gzip end marker"
    return False, None


def _copy(fin, fout, cap: int) -> tuple[int, bool]:  # noqa: ANN001 - binary file objects
    """Copy at most ``cap`` bytes; True when there was more."""
    written = 0
    while written < cap:
        block = fin.read(min(_COPY_BLOCK, cap - written))
        if not block:
            return written, False
        fout.write(block)
        written += len(block)
    return written, bool(fin.read(1))


def _safe(name: str) -> Path:
    """A member name as a relative path that stays inside the unpack directory."""
    parts = [p for p in PurePosixPath(name.replace("\\", "/")).parts if p not in ("", ".", "..", "/")]
    parts = [re.sub(r"[^\w.@+=-]", "_", p)[:120] for p in parts][-8:]
    return Path(*parts) if parts else Path("member")


def _dispatch(builder: RunBuilder, path: Path, alias: str, archive_src: str) -> None:
    """Classify an unpacked member like a file of the run and hand it to its reader."""
    from autopsy.ingest import readers

    size = path.stat().st_size
    kind = classify(path, size)
    if kind == "ignored" and size:
        kind = "text_log"  # a member the user attached is read as a log whatever its name (like a file argument)
    builder.aliases[str(path)] = alias
    art = builder.artifact(alias, kind, size=size)
    if kind in _NOT_UNPACKED or kind == KIND:
        art.status = "ignored"
        return
    reader = readers().get(kind)
    if reader is None:
        builder.problem(alias, kind, f"no reader for {kind} inside an archive", "ignored")
        return
    try:
        reader(Found(path, kind, size), builder)
    except Exception as exc:  # noqa: BLE001 - one bad member must not lose the others
        from autopsy.errors import debug_enabled

        if debug_enabled():
            raise
        builder.problem(alias, kind, f"reader failed: {type(exc).__name__}: {exc}"[:500])


READERS = {KIND: read_archive}
