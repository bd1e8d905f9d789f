"""Stream a text log as decoded chunks of whole lines, in bounded memory.

Logs can be gigabytes (a week of tqdm refreshes) or hold one 50 MB line (a tensor printed in
full). Reading line by line in Python is too slow for the first and unbounded for the second,
so the file is read in blocks of ``BLOCK_BYTES`` cut at the last line break (``\\n`` or the
``\\r`` tqdm uses),
and stripped of ANSI colour codes. Chunks stay bytes: the scans run on bytes and only the
pieces kept (keys, event lines, the head for config facts) are decoded, with replacement. A line longer than ``LINE_CAP`` with no break before the end
of a block is cut to its first ``LINE_CAP`` bytes and the rest of it skipped: the caller learns
about it through :attr:`Chunk.truncated_lines` and records a partial read.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import BinaryIO

from .text_metrics import NUM, has

#: bytes read per block: big enough that regex scans run in C, small enough for flat memory
BLOCK_BYTES = 4 * 1024 * 1024
#: longest line part parsed; a longer line (a dumped tensor, binary junk) is cut here
LINE_CAP = 64 * 1024
#: a block with more NUL bytes than this fraction is binary data, not log text
NUL_FRACTION = 0.01

_ANSI = re.compile(rb"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|\x1b[()][A-Za-z0-9]|\x1b[=>78MDEc]")


@dataclass
class Chunk:
    text: bytes  # undecoded (regex scans on bytes are ~2x faster); decode the pieces you keep
    first_line: int  # 1-based ``\n`` line number of text[0]
    truncated_lines: list[int] = field(default_factory=list)  # line numbers cut at LINE_CAP
    binary_bytes: int = 0  # NUL bytes seen in this block when above NUL_FRACTION


def strip_ansi(data: bytes) -> bytes:
    return _ANSI.sub(b"", data) if b"\x1b" in data else data


#: full-width punctuation (UTF-8 ``\xef\xbc..``) that logs printed by Chinese-language scripts put between a key and
#: its value (``Loss\uff1a1.98``, ``loss\uff1a nan\uff0c lr``), as the ASCII the parsers read
_FULL_WIDTH = {b"\xef\xbc\x9a": b": ", b"\xef\xbc\x8c": b", ", b"\xef\xbc\x88": b"(", b"\xef\xbc\x89": b")",
               b"\xef\xbc\x9b": b"; "}


def ascii_punctuation(data: bytes) -> bytes:
    """``data`` with full-width colons, commas, semicolons and parentheses as ASCII (line breaks unchanged)."""
    if b"\xef" not in data or b"\xef\xbc" not in data:  # the first a memchr (~0.5 ms a 4 MB block, the pair ~5 ms)
        return data
    for wide, narrow in _FULL_WIDTH.items():
        data = data.replace(wide, narrow)
    return data


#: Python's ``'{:x<6f}'.format(v)`` (PaddleOCR's and PaddleVideo's training stats, ``ppocr/utils/stats.py``) pads
#: only what is shorter than six characters, i.e. a non-finite value: ``loss: nanxxx``, ``infxxx``, ``-infxx``
_X_PADDED = re.compile(rb"(?<![\w.])(-?(?:nan|inf))(x{1,3})(?![\w.])")


def _blank_pad(m: re.Match[bytes]) -> bytes:
    return m[1] + b" " * len(m[2])


def unpad_nonfinite(data: bytes) -> bytes:
    """``data`` with the ``x`` padding after a non-finite value as spaces (the same length, so offsets hold)."""
    if b"x" not in data or not has(data, b"nanx") and not has(data, b"infx"):  # a memchr first: HF dicts hold no x
        return data
    return _X_PADDED.sub(_blank_pad, data)


#: a scalar tensor's repr printed where a metric's value goes (``print(f"Loss: {loss}")`` on a tensor): torch's
#: ``Loss: tensor(0.6931, device='cuda:0', grad_fn=<NllLossBackward0>)``, TF eager's ``loss: tf.Tensor(0.69314,
#: shape=(), dtype=float32)``, ``print("loss", loss)``'s ``loss tensor(0.6931, grad_fn=...)``, a one-element
#: ``tensor([2478.5229], device='cuda:0', grad_fn=<NegBackward0>)``; not a dict's quoted item (``'loss_cls':
#: tensor(...)``: parse_tensor_dicts reads those)
_SCALAR_TENSOR = re.compile(rb"(tensor\(\[?|tf\.Tensor\()[ \t]*(" + NUM + rb")(\]?(?:,[ \t]*(?:device|grad_fn|dtype|"
                            rb"requires_grad|shape)=[^,()\r\n]{0,80}(?:\(\))?)*\))")


def _value_slot(data: bytes, at: int) -> bool:
    """Whether the text before ``at`` ends where a value goes: ``:``/``=`` and blanks (not a quoted dict key's), or a
    word and blanks (``print("loss", loss)``)."""
    i = at
    while i > 0 and data[i - 1] in (32, 9):
        i -= 1
    if i == 0:
        return False
    c = data[i - 1]
    if c in (58, 61):  # ':' '='
        return i < 2 or data[i - 2] not in (34, 39)  # not after a quote: a dict item (parse_tensor_dicts reads those)
    return i < at and (65 <= c <= 90 or 97 <= c <= 122)


def untensor(data: bytes) -> bytes:
    """``data`` with each scalar tensor repr after a ``:``/``=`` (or a word and a blank) as its bare value, padded with
    spaces (the same length, so offsets hold)."""
    if not has(data, b"ensor("):
        return data
    out: bytearray | None = None
    for m in _SCALAR_TENSOR.finditer(data):
        if not _value_slot(data, m.start()):
            continue
        if out is None:
            out = bytearray(data)
        value = m[2]
        out[m.start():m.end()] = value + b" " * (m.end() - m.start() - len(value))
    return bytes(out) if out is not None else data


#: a Markdown (or e-mail) quote marker at a line's start: ``> `` before every line of a log pasted into an issue
#: reply, nested as ``> > ``; looked for in a file's first block only (a quoted paste is small)
_QUOTED = re.compile(rb"\n((?:>[ \t]?)+)")
_QUOTED_FIRST = re.compile(rb"(?:>[ \t]?)+")


def _blank_quote(m: re.Match[bytes]) -> bytes:
    return b"\n" + b" " * len(m[1])


def unquote(data: bytes, first: bool = False) -> bytes:
    """``data`` with the quote markers at line starts as spaces (the same length, so offsets hold): the indented
    detail lines a loop prints under its step line read as they were printed. ``first``: ``data`` starts a line."""
    if first and data[:1] == b">":
        m = _QUOTED_FIRST.match(data)
        data = b" " * m.end() + data[m.end():]
    if b"\n>" not in data:
        return data
    return _QUOTED.sub(_blank_quote, data)


def _last_break(buf: bytes | bytearray) -> int:
    return max(buf.rfind(b"\n"), buf.rfind(b"\r"))


def iter_chunks(fh: BinaryIO, block_bytes: int = BLOCK_BYTES, line_cap: int = LINE_CAP) -> Iterator[Chunk]:
    """Yield :class:`Chunk` objects covering the whole file; never raises on content."""
    carry = b""
    skipping = False  # inside the unread rest of a line cut at line_cap
    line_no = 1
    while True:
        data = fh.read(block_bytes)
        eof = not data
        truncated: list[int] = []
        if skipping and data:
            cut = min((i for i in (data.find(b"\n"), data.find(b"\r")) if i >= 0), default=-1)
            if cut < 0:
                continue
            data = data[cut:]
            skipping = False
        buf = carry + data
        carry = b""
        if not eof:
            brk = _last_break(buf)
            if brk >= 0:
                carry = buf[brk + 1:]
                buf = buf[:brk + 1]
            else:
                carry, buf = buf, b""
            if len(carry) > line_cap:
                # an unfinished line already longer than the cap: keep its head, skip the rest
                head_breaks = buf.count(b"\n")
                truncated.append(line_no + head_breaks)
                buf = buf + carry[:line_cap] + b"\r"
                carry = b""
                skipping = True
        if not buf:
            if eof:
                return
            continue
        nul = buf.count(b"\x00") if b"\x00" in buf else 0  # the test is a memchr: most blocks have none
        text = untensor(unpad_nonfinite(ascii_punctuation(strip_ansi(bytes(buf)))))
        if line_no == 1:  # a quoted paste fits in one block; a two-byte search costs ~3.5 ms a block, so once a file
            text = unquote(text, True)
        if nul:
            text = text.replace(b"\x00", b"")
        yield Chunk(text, line_no, truncated, nul if nul > len(buf) * NUL_FRACTION else 0)
        line_no += buf.count(b"\n")
        if eof:
            return
