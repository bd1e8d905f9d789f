"""The text-log reader gives exactly the pinned results (issue 15: the speed work must not change
them): the same series, steps, values (NaN equal to NaN), line numbers, events, facts, frameworks
and partial-read problems, on every text fixture, on generated edge cases (chunk boundaries, huge
lines, NUL junk, CRLF, a cut file) and, where /work/shared is present, on the dev cases.

The pins were written by the reader before the speed work (``tests/textlog_snapshot.py --write``).
"""

from __future__ import annotations

import json

import pytest

from tests.textlog_snapshot import ROOT, SHARED_CASES, fixture_logs, shared_logs, snapshot, synthetic_snapshots

PINS = json.loads((ROOT / "fixtures" / "textlog_pins.json").read_text())


def test_every_text_fixture_is_pinned() -> None:
    assert sorted(str(p.relative_to(ROOT.parent)) for p in fixture_logs()) == sorted(PINS["fixtures"])


@pytest.mark.parametrize("rel", sorted(PINS["fixtures"]))
def test_fixture_matches_pin(rel: str) -> None:
    assert snapshot(ROOT.parent / rel) == PINS["fixtures"][rel]


def test_synthetic_cases_match_pins() -> None:
    got = synthetic_snapshots()
    assert sorted(got) == sorted(PINS["synthetic"])
    for name, snap in got.items():
        assert snap == PINS["synthetic"][name], name


@pytest.mark.skipif(not SHARED_CASES.is_dir(), reason="/work/shared/dev_cases is not here")
@pytest.mark.parametrize("case", sorted(PINS["shared_dev_cases"]))
def test_shared_dev_case_matches_pin(case: str) -> None:
    path = SHARED_CASES / case / "log.txt"
    if not path.is_file():
        pytest.skip(f"{path} is not here")
    assert snapshot(path) == PINS["shared_dev_cases"][case]


def test_no_shared_case_left_unpinned() -> None:
    assert {p.parent.name for p in shared_logs()} <= set(PINS["shared_dev_cases"])
