#!/usr/bin/env python3
"""How much a verdict's confidence means: accuracy per confidence band on a corpus of cases.

    .venv/bin/python scripts/calibration.py [--cases tests/fixtures/dev_cases]

Each case (a folder with truth.json) is copied without truth.json and analysed in-process; the truth
is read only to score. A verdict is right when it names the truth's root cause (or one of its
``accept`` ids, or the scorer's equivalents), and for a healthy truth when it says healthy. Prints
one row per band and the figure the README quotes: of the verdicts at confidence >= 0.8, how many
are right.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
EQUIV = {"fp16_overflow": {"loss_scale_collapse"}, "loss_scale_collapse": {"fp16_overflow"},
         "all_labels_masked": {"empty_response"}, "empty_response": {"all_labels_masked"}}
BANDS = [(0.0, 0.5), (0.5, 0.65), (0.65, 0.8), (0.8, 0.9), (0.9, 1.01)]


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--cases", default=str(ROOT / "tests" / "fixtures" / "dev_cases"))
    a = ap.parse_args()
    sys.path.insert(0, str(ROOT))
    from autopsy.pipeline import analyze

    rows = []
    with tempfile.TemporaryDirectory() as t:
        for case in sorted(p.parent for p in Path(a.cases).glob("*/truth.json")):
            truth = json.loads((case / "truth.json").read_text())
            want = truth["root_cause"]
            ok_ids = {want, *truth.get("accept", []), *EQUIV.get(want, set())}
            dst = Path(t) / case.name
            shutil.copytree(case, dst, ignore=shutil.ignore_patterns("truth.json"))
            v = analyze(dst).diagnosis.verdict
            right = v.status == "healthy" if want == "healthy" else (v.status == "failed" and v.root_cause in ok_ids)
            rows.append((case.name, v.status, v.root_cause, v.confidence, right))
    print(f"{'band':<12} {'verdicts':>8} {'right':>6}")
    for lo, hi in BANDS:
        sel = [r for r in rows if lo <= r[3] < hi]
        print(f"[{lo:.2f},{min(hi, 1.0):.2f}) {len(sel):>8} {sum(r[4] for r in sel):>6}")
    high = [r for r in rows if r[3] >= 0.8]
    n_right = sum(r[4] for r in high)
    print(f"confidence >= 0.8: {n_right}/{len(high)} right ({100 * n_right / max(len(high), 1):.0f}%); "
          f"all verdicts: {sum(r[4] for r in rows)}/{len(rows)}")
    for name, status, rc, conf, right in rows:
        if not right:
            print(f"  wrong: {name} -> {status} {rc} ({conf:.2f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
