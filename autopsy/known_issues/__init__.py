"""Known framework bugs as data: one YAML entry per bug (``entries/<ID>.yaml``), the fixed
vocabulary of metric shapes their signatures use, and the matcher that grades an entry against a
Run (direct / candidate / info). Detector FW001 turns matches into findings; ``autopsy
known-issues`` lists and matches entries; ``autopsy preflight`` checks a config and this
environment before a run. How to add an entry: docs/known-issues.md.
"""

from __future__ import annotations

from autopsy.known_issues.match import Match, match_run
from autopsy.known_issues.schema import Entry, LoadResult, load_entries

__all__ = ["Entry", "LoadResult", "Match", "load_entries", "match_run"]
