"""Reader for compressed logs and attachments: ``train.log.gz``, ``train.log.bz2``, ``train.log.xz``,
``logs.zip``, ``logs.tar``, ``logs.tar.gz``/``.tgz``, ``logs.tar.bz2``, ``logs.tar.xz`` (a GitHub issue
attachment, a cluster's log bundle), read as if their members lay in the run directory.

Nothing is extracted with an archive library's own extract functions: each member's bytes are
streamed out (``ZipFile.open``, ``TarFile.extractfile`` in stream mode, incremental gzip/bz2/xz
decompressors) into a private temporary directory under a sanitised name, classified like any other
file (:func:`autopsy.discover.classify`, content first) and handed to their kind's reader; the report
names them ``logs.zip/rank0.log`` (``builder.aliases``). Untrusted input, so everything is bounded:
bytes written per member and per archive (a bomb stops at the cap, with a message), member count, no
nesting (an archive inside an archive is named, not opened), and only regular files: tar symlinks,
hardlinks, devices and FIFOs, and tar members with absolute or ``..`` names, are skipped and named.
A cut or damaged archive keeps the members read before the damage and says where it broke.
Checkpoints inside archives are not unpacked.
"""

from __future__ import annotations

import bz2
import lzma
import re
import shutil
import tarfile
import tempfile
import zipfile
import zlib
from collections.abc import Callable
from pathlib import Path, PurePosixPath

from autopsy.discover import Found, classify, looks_archived
from autopsy.ingest.base import RunBuilder

KIND = "archive"
#: decompressed bytes read from one member (a log bigger than this is read up to here)
MAX_MEMBER_BYTES = 1 << 30
#: decompressed bytes written per archive in all: a zip bomb stops here
MAX_ARCHIVE_BYTES = 2 << 30
#: members looked at per zip or tar (an attachment of logs has a handful; more is a dataset)
MAX_MEMBERS = 2000
#: bytes of tar members passed over in all (a tar is read in one pass: skipping a 50 GB checkpoint
#: bundle still decompresses it); past this the rest of the archive is not looked at
MAX_SCAN_BYTES = 8 << 30
_COPY_BLOCK = 1 << 20
_ARCHIVE_NAME = re.compile(r"\.(?:zip|gz|tgz|tbz2?|txz|tar|bz2|xz|7z|rar|zst)$", re.IGNORECASE)
#: magic bytes -> compression of a single-stream file (a tar inside is recognised after decompressing)
GZIP_MAGIC, BZ2_MAGIC, XZ_MAGIC, ZIP_MAGIC = b"\x1f\x8b", b"BZh", b"\xfd7zXZ\x00", b"PK\x03\x04"
_TAR_MAGIC_AT = 257  # "ustar" in a POSIX/GNU tar header
#: member kinds not unpacked (weights: too big to copy, and the checkpoint stage reads files in place)
_NOT_UNPACKED = {"safetensors", "torch", "training_args_bin", "ignored"}


def _is_tar_header(head: bytes) -> bool:
    return head[_TAR_MAGIC_AT:_TAR_MAGIC_AT + 5] == b"ustar"


#: compression name -> (magic, fresh incremental decompressor); gzip has its own loop (multi-member, zlib API)
_STREAMS: dict[str, tuple[bytes, Callable[[], object]]] = {
    "bzip2": (BZ2_MAGIC, bz2.BZ2Decompressor),
    "xz": (XZ_MAGIC, lzma.LZMADecompressor),
}


def read_archive(found: Found, builder: RunBuilder) -> None:
    src = builder.rel(found.path)
    try:
        with open(found.path, "rb") as fh:
            head = fh.read(512)
    except OSError as exc:
        builder.problem(src, KIND, f"cannot open: {exc.strerror or exc}")
        return
    if not looks_archived(head):
        builder.problem(src, KIND, "named like an archive but not gzip, bzip2, xz, zip or tar data (7z, rar and "
                        "zstd are not read): unpack it and point autopsy at the files", "ignored")
        return
    tmp = Path(tempfile.mkdtemp(prefix="autopsy-unpack-"))
    try:
        if head.startswith(ZIP_MAGIC):
            _read_zip(found, builder, src, tmp)
        elif _is_tar_header(head) or (head.startswith((GZIP_MAGIC, BZ2_MAGIC, XZ_MAGIC)) and _compressed_tar(found.path)):
            _read_tar(found, builder, src, tmp)
        else:
            _read_stream(found, builder, src, tmp, head)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _compressed_tar(path: Path) -> bool:
    """A compressed file whose first decompressed block is a tar header (``.tar.gz`` under any name)."""
    try:
        with tarfile.open(path, "r|*") as tf:
            return tf.next() is not None
    except _STREAM_ERRORS:
        return False


def _member_name(archive_name: str) -> str:
    low = archive_name.lower()
    for ext in (".gz", ".bz2", ".xz"):
        if low.endswith(ext):
            return archive_name[:-len(ext)] or "member"
    return archive_name or "member"


def _read_stream(found: Found, builder: RunBuilder, src: str, tmp: Path, head: bytes) -> None:
    """One compressed file (``train.log.gz``, ``.bz2``, ``.xz``): the decompressed bytes are the log."""
    inner = _member_name(found.path.name)
    if inner.lower().endswith(".tar"):
        # named .tar.gz/.tar.xz/... yet its first block would not open as a tar: cut or damaged early on
        builder.problem(src, KIND, "not a readable tar archive: the compressed data is cut or damaged before the "
                        "first member; re-download or re-create it")
        return
    if _ARCHIVE_NAME.search(inner):
        builder.problem(src, KIND, f"holds another archive ({inner}): nested archives are not opened; unpack it "
                        "and point autopsy at the files", "ignored")
        return
    name = "gzip" if head.startswith(GZIP_MAGIC) else next(n for n, (m, _) in _STREAMS.items() if head.startswith(m))
    dest = tmp / "0" / _safe(inner)
    dest.parent.mkdir(parents=True)
    try:
        with open(found.path, "rb") as fin, open(dest, "wb") as fout:
            if name == "gzip":
                capped, damage = _gunzip(fin, fout, MAX_MEMBER_BYTES)
            else:
                capped, damage = _decompress(fin, fout, MAX_MEMBER_BYTES, _STREAMS[name][1])
    except OSError as exc:
        builder.problem(src, KIND, f"cannot read: {exc.strerror or exc}")
        return
    if damage:
        # a truncated stream still yields what came before the cut
        builder.problem(src, KIND, f"{name} data is damaged or cut ({damage}); what came before the damage was read",
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
            plan = _plan(name, info.file_size, total, tmp / str(n), skipped)
            if plan is None:
                continue
            dest, cap = plan
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


#: what a damaged or cut tar/bz2/xz stream raises, whichever layer notices first
# TypeError: CPython's tarfile reads a gzip header cut right after its magic bytes as ``ord(b"")``
_STREAM_ERRORS = (tarfile.TarError, OSError, EOFError, zlib.error, lzma.LZMAError, ValueError, TypeError)


def _plan(name: str, size: int, total: int, where: Path, skipped: list[str]) -> tuple[Path, int] | None:
    """Where a zip/tar member goes and how many bytes it may take; None for a member not unpacked
    (weights, hidden files: silently; past the archive's budget: named in ``skipped``)."""
    if classify(Path(name), size) in ("safetensors", "torch") or PurePosixPath(name).name.startswith("."):
        return None
    if total >= MAX_ARCHIVE_BYTES:
        skipped.append(f"{name} (the archive's {MAX_ARCHIVE_BYTES >> 20} MiB budget was used up)")
        return None
    dest = where / _safe(name)
    dest.parent.mkdir(parents=True, exist_ok=True)
    return dest, min(MAX_MEMBER_BYTES, MAX_ARCHIVE_BYTES - total)


def _tar_refusal(info: tarfile.TarInfo) -> str | None:
    """Why a tar member is not read (None for a regular file with a relative name inside the archive)."""
    if info.issym():
        return f"a symbolic link to {info.linkname!r}: links are not followed"
    if info.islnk():
        return f"a hard link to {info.linkname!r}: links are not followed"
    if info.ischr() or info.isblk():
        return "a device file"
    if info.isfifo():
        return "a FIFO"
    if not info.isreg():
        return "not a regular file"
    name = info.name.replace("\\", "/")
    if name.startswith("/") or re.match(r"[A-Za-z]:", name) or ".." in PurePosixPath(name).parts:
        return "an absolute or '..' name pointing outside the archive"
    return None


def _read_tar(found: Found, builder: RunBuilder, src: str, tmp: Path) -> None:
    """A tar, plain or compressed (gzip, bzip2, xz), read in stream mode: one pass, member by member."""
    try:
        tf = tarfile.open(found.path, "r|*")
    except _STREAM_ERRORS as exc:
        builder.problem(src, KIND, f"not a readable tar archive ({type(exc).__name__}: {exc}); re-download or "
                        "re-create it")
        return
    total = looked = scanned = 0
    skipped: list[str] = []
    damage: str | None = None
    with tf:
        while True:
            try:
                info = tf.next()
            except _STREAM_ERRORS as exc:
                damage = f"after {looked} member(s): {type(exc).__name__}: {exc}"
                break
            if info is None:
                break
            if info.isdir():
                continue
            looked += 1
            scanned += info.size
            if scanned > MAX_SCAN_BYTES:
                builder.problem(src, KIND, f"members past the first {MAX_SCAN_BYTES >> 30} GiB of the archive were "
                                "not looked at", "partial")
                break
            if looked > MAX_MEMBERS:
                builder.problem(src, KIND, f"more than {MAX_MEMBERS} members: only the first {MAX_MEMBERS} were "
                                "looked at", "partial")
                break
            name = info.name
            why = _tar_refusal(info)
            if why is None and _ARCHIVE_NAME.search(name):
                why = "an archive inside the archive: not opened"
            if why is not None:
                skipped.append(f"{name} ({why})")
                continue
            plan = _plan(name, info.size, total, tmp / str(looked), skipped)
            if plan is None:
                continue
            dest, cap = plan
            alias = f"{src}/{name}"
            cut: str | None = None
            with open(dest, "wb") as fout:
                try:
                    fin = tf.extractfile(info)
                    written, capped = _copy(fin, fout, cap) if fin is not None else (0, False)
                except _STREAM_ERRORS as exc:
                    cut = f"{type(exc).__name__}: {exc}"
                    written, capped = fout.tell(), False
            total += written
            if capped:
                builder.problem(alias, KIND, f"unpacks to more than {cap >> 20} MiB (an archive bomb?): only the "
                                f"first {cap >> 20} MiB were read", "partial")
            if cut is not None:
                damage = f"in member {name} ({cut})"
                if written:
                    _dispatch(builder, dest, alias, src)
                    builder.problem(alias, KIND, f"the archive is cut inside this member ({cut}); the first {written} "
                                    "bytes were read", "partial")
                break
            _dispatch(builder, dest, alias, src)
    if damage:
        builder.problem(src, KIND, f"tar archive is damaged or cut {damage}; the members before the damage were read",
                        "partial")
    if skipped:
        builder.problem(src, KIND, f"{len(skipped)} member(s) not read: " + "; ".join(skipped[:5])[:600], "partial")


def _decompress(fin, fout, cap: int, new: Callable[[], object]) -> tuple[bool, str | None]:  # noqa: ANN001
    """bzip2/xz counterpart of :func:`_gunzip` (concatenated streams included): (capped, damage or None)."""
    d = new()
    written = 0
    fed = False
    while True:
        raw = fin.read(_COPY_BLOCK)
        if not raw:
            break
        data = raw
        while True:
            try:
                out = d.decompress(data, cap - written + 1)  # type: ignore[attr-defined]
            except (OSError, EOFError, lzma.LZMAError, ValueError) as exc:
                return False, f"{type(exc).__name__}: {exc}"
            fed = True
            if written + len(out) > cap:
                fout.write(out[:cap - written])
                return True, None
            fout.write(out)
            written += len(out)
            if d.eof:  # type: ignore[attr-defined]
                rest = d.unused_data  # type: ignore[attr-defined]
                d, fed = new(), False
                if not rest.strip(b"\x00"):
                    break
                data = rest
                continue
            if d.needs_input:  # type: ignore[attr-defined]
                break
            data = b""
    if fed and not d.eof:  # type: ignore[attr-defined]
        return False, "the stream ends before its end marker"
    return False, None


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
