"""What the text-log reader makes of a file, as comparable digests (tests/test_textlog_pinned.py).

``snapshot(path)`` reads one file with ``read_text_log`` alone and returns, per part, a count and
a sha256 of a canonical dump: the scalar rows (source, metric, key, step, value with every NaN
alike, line) in the order ``RunBuilder.finish`` gives them, the events (kind, message, line, step,
data, count, rank), the artifact statuses and problems, the config facts and the frameworks.

Run by hand to (re)write the pins from the reader as it is now::

    .venv/bin/python tests/textlog_snapshot.py --write tests/fixtures/textlog_pins.json
"""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent
#: text fixtures pinned in the repository (all text logs under tests/fixtures)
FIXTURE_GLOBS = ("**/*.log", "**/*.txt", "**/*.out", "**/stdout", "**/nohup.out")
SHARED_CASES = Path("/work/shared/dev_cases")


def fixture_logs() -> list[Path]:
    found: set[Path] = set()
    for base in (ROOT / "fixtures", ROOT.parent / "sample_logs"):
        for g in FIXTURE_GLOBS:
            found.update(p for p in base.glob(g) if p.is_file())
    return sorted(found)


def shared_logs() -> list[Path]:
    return sorted(SHARED_CASES.glob("*/log.txt")) if SHARED_CASES.is_dir() else []


def synthetic_cases() -> dict[str, bytes]:
    """Generated logs for the edges real fixtures lack: chunk boundaries (a mixed log over several
    4 MB blocks), a 200 KB line, NUL junk, CRLF, a file cut mid-record, 5.x string dicts."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("bench_logs", ROOT.parent / "benchmarks" / "bench_logs.py")
    bench = importlib.util.module_from_spec(spec)
    assert spec.loader is not None
    spec.loader.exec_module(bench)
    import tempfile

    cases: dict[str, bytes] = {}
    with tempfile.TemporaryDirectory() as tmp:
        p = Path(tmp) / "m.log"
        bench.write_mixed_log(p, 20_000)
        mixed = p.read_bytes()
        bench.write_log(p, 3_000)
        hf4 = p.read_bytes()
    cases["mixed_20000.log"] = mixed
    cases["hf4_3000.log"] = hf4
    small = mixed[:400_000]
    cases["mixed_cut_mid_record.log"] = small[:small.rfind(b"'grad_norm'") + 5]
    cases["mixed_crlf.log"] = small.replace(b"\n", b"\r\n")
    cases["huge_line.log"] = small[:150_000] + b"{'loss': " + b"1" * 200_000 + b"}\n" + small[150_000:]
    cases["huge_line_no_break.log"] = small[:150_000] + b"x" * (9 * 1024 * 1024) + small[150_000:]
    cases["nul_junk.log"] = small[:100_000] + bytes(range(256)) * 400 + b"\x00" * 50_000 + small[100_000:]
    cases["ansi.log"] = small[:200_000].replace(b"{'loss'", b"\x1b[32m{'loss'").replace(b"}\n", b"}\x1b[0m\n")
    cases["bare_nan.log"] = b"nan\nNaN\n{'loss': nan}\n{'loss': nan, 'grad_norm': nan}\nstep 3 loss nan\n-inf\n"
    return cases


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()[:24]


def _json(obj: Any) -> bytes:
    return json.dumps(obj, sort_keys=True, default=repr, allow_nan=True).encode()


def snapshot(path: Path) -> dict[str, Any]:
    from autopsy.discover import Found
    from autopsy.ingest.base import RunBuilder
    from autopsy.ingest.textlog import read_text_log

    builder = RunBuilder(path.parent)
    read_text_log(Found(path, "text_log", path.stat().st_size), builder)
    run = builder.finish()
    df = run.scalars
    step = df["step"].to_numpy(dtype=np.int64, na_value=-(2 ** 62)) if len(df) else np.zeros(0, np.int64)
    value = df["value"].to_numpy(dtype=np.float64) if len(df) else np.zeros(0)
    value = np.where(np.isnan(value), np.nan, value)  # one NaN bit pattern: NaN == NaN here
    line = df["line"].to_numpy(dtype=np.float64, na_value=-1.0) if len(df) else np.zeros(0)
    labels = _json([[str(x) for x in df[c]] for c in ("source", "metric", "key") if c in df.columns])
    scalars = labels + step.tobytes() + value.tobytes() + line.tobytes()
    events = [[e.kind, e.message, e.source, e.line, e.step, e.data, e.count, e.rank] for e in run.events]
    artifacts = [[a.path, a.kind, a.status, a.problem] for a in run.artifacts]
    facts = sorted([f.key, repr(f.value), f.source, f.where, f.original_key]
                   for fs in run.config._facts.values() for f in fs)
    exact = {k: v.exact_steps for k, v in builder._sources.items()}
    return {
        "exact_steps": exact,
        "rows": int(len(df)), "nan": int(np.isnan(value).sum()), "scalars": _sha(scalars),
        "metrics": sorted({str(m) for m in df["metric"]}) if len(df) else [],
        "events": len(events), "events_sha": _sha(_json(events)),
        "artifacts": _json(artifacts).decode(),
        "facts": len(facts), "facts_sha": _sha(_json(facts)),
        "frameworks": sorted(run.frameworks),
    }


def synthetic_snapshots() -> dict[str, Any]:
    import tempfile

    snaps = {}
    with tempfile.TemporaryDirectory() as tmp:
        for name, data in synthetic_cases().items():
            p = Path(tmp) / name
            p.write_bytes(data)
            snaps[name] = snapshot(p)
            p.unlink()
    return snaps


def main() -> None:
    out = Path(sys.argv[sys.argv.index("--write") + 1])
    pins = {str(p.relative_to(ROOT.parent)): snapshot(p) for p in fixture_logs()}
    shared = {p.parent.name: snapshot(p) for p in shared_logs()}
    synth = synthetic_snapshots()
    out.write_text(json.dumps({"fixtures": pins, "shared_dev_cases": shared, "synthetic": synth}, indent=1, sort_keys=True) + "\n")
    print(f"wrote {len(pins)} fixture, {len(shared)} shared and {len(synth)} synthetic pins to {out}")


if __name__ == "__main__":
    main()
