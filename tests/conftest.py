from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
from hypothesis import settings

#: every property test draws a fixed sequence of examples, so a build never fails on a lucky draw (CI runs a clean
#: clone: no example database); AUTOPSY_FUZZ_RANDOM=1 draws fresh examples to hunt for new failures
settings.register_profile("autopsy", derandomize=not os.environ.get("AUTOPSY_FUZZ_RANDOM"))
settings.load_profile("autopsy")

FIXTURES = Path(__file__).parent / "fixtures"
EXAMPLES = FIXTURES / "examples"
DEV_CASES = FIXTURES / "dev_cases"
REPO = Path(__file__).resolve().parents[1]


@pytest.fixture
def copy_fixture(tmp_path):
    """Copy a fixture file or directory into a temp dir (tests never read the repo copy in place)."""

    def _copy(rel: str | Path) -> Path:
        src = FIXTURES / rel
        dst = tmp_path / Path(rel).name
        if src.is_dir():
            shutil.copytree(src, dst)
        else:
            shutil.copy2(src, dst)
        return dst

    return _copy
