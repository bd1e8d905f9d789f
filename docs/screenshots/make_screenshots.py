"""Regenerate the report screenshots in docs/screenshots/ (needs chromium).

    .venv/bin/python docs/screenshots/make_screenshots.py

The failing shot is sample_logs/lr_too_high_nan, the healthy one sample_logs/healthy_sft (else the fixtures);
a phone-width (390 px) shot of the failing report shows the narrow layout.
"""

from __future__ import annotations

import shutil
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
sys.path[:0] = [str(REPO), str(REPO / "tests")]

from report_browser import ensure_chromium, screenshot  # noqa: E402  (after the sys.path line)
from test_report_browser import sample_runs  # noqa: E402  (after the sys.path line)

from autopsy.pipeline import analyze  # noqa: E402  (after the sys.path line)
from autopsy.render import html  # noqa: E402  (after the sys.path line)
from autopsy.report import build_report  # noqa: E402  (after the sys.path line)

SHOTS = {"failing": [("report-failing.png", 1280, 2000), ("report-failing-phone.png", 390, 1500)],
         "healthy": [("report-healthy.png", 1280, 1300)]}


#: the documented pair: a red FAILED report (lr_too_high, with NaN checkpoints) and a healthy SFT run
PREFERRED = {"failing": REPO / "sample_logs" / "lr_too_high_nan", "healthy": REPO / "sample_logs" / "healthy_sft"}


def _runs() -> list[tuple[str, Path]]:
    return [(label, PREFERRED[label] if PREFERRED[label].is_dir() else run) for label, run in sample_runs()]


def main() -> int:
    chromium, why = ensure_chromium()
    if chromium is None:
        print(why, file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory() as tmp:
        for label, run in _runs():
            local = Path(tmp) / run.name
            shutil.copytree(run, local)
            page = Path(tmp) / f"{label}.html"
            page.write_text(html.render(build_report(analyze(local), f"autopsy run {run.name}")), encoding="utf-8")
            for name, w, h in SHOTS[label]:
                png = screenshot(chromium, page, HERE / name, w, h, Path(tmp) / name)
                print(f"{png.relative_to(REPO)}  {png.stat().st_size // 1024} KB  ({run.relative_to(REPO)})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
