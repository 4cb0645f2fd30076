"""How much of a question repeats its judged notes' titles and headings: shared by the golden-set checks of
the report-only cells (a question that copies a heading tests string matching, not search)."""

from __future__ import annotations

import re


def words(text: str) -> list[str]:
    """Lower-cased words, German letters and hyphens included."""
    return re.findall(r"[\wäöüß-]+", text.lower())


def longest_shared_run(query: list[str], line: list[str]) -> int:
    """The most consecutive words `query` and `line` share."""
    best = 0
    for i in range(len(query)):
        for j in range(len(line)):
            k = 0
            while i + k < len(query) and j + k < len(line) and query[i + k] == line[j + k]:
                k += 1
            best = max(best, k)
    return best
