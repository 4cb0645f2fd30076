"""Gold chunk boundaries of the sample vault (issue 3): every note's chunks, written out by hand.

`tests/gold/sample_vault_chunks.json` was derived from SPEC R7-R10 and the documented edge-case rules
of `mindnet.chunking.structure` without looking at the chunker's output. A note whose gold the chunker
does not meet because it breaks a rule carries a `rule_deviation` there and is a strict xfail here, so
the test turns red (XPASS) as soon as the chunker is fixed and the marker can go.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, NamedTuple

import pytest

from mindnet.api import Vault
from mindnet.chunking.base import Chunk

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = ROOT / "examples" / "vault"
GOLD_FILE = ROOT / "tests" / "gold" / "sample_vault_chunks.json"
GOLD: dict[str, dict[str, Any]] = json.loads(GOLD_FILE.read_text(encoding="utf-8"))["notes"]


class Row(NamedTuple):
    """What the gold fixes about one chunk."""

    section_path: str
    first_line: str
    """`fulltext[content_start:]` up to the end of its line: where the chunk's new content begins."""
    overlap_first_line: str | None
    """First line of `text` when the chunk starts with overlap, else None."""
    oversize: bool
    has_code: bool
    has_summary: bool


def _row(chunk: Chunk, fulltext: str) -> Row:
    first = fulltext[chunk.content_start :].partition("\n")[0].rstrip("\r")
    overlap = None if chunk.char_start == chunk.content_start else chunk.text.partition("\n")[0]
    return Row(chunk.section_path, first, overlap, bool(chunk.oversize), bool(chunk.has_code), bool(chunk.summary))


def _gold_rows(path: str) -> list[Row]:
    return [Row(**chunk) for chunk in GOLD[path]["chunks"]]


@pytest.fixture(scope="module")
def actual() -> dict[str, list[Row]]:
    """The chunker's rows for every note of the sample vault, by vault-relative path."""
    vault = Vault(SAMPLE)
    fulltext = {note.path: note.fulltext for note in vault.notes}
    rows: dict[str, list[Row]] = {path: [] for path in fulltext}
    for chunk in vault.chunks():
        rows[chunk.path].append(_row(chunk, fulltext[chunk.path]))
    return rows


def _params(count: bool) -> list[Any]:
    params = []
    for path, entry in GOLD.items():
        deviation = entry.get("rule_deviation")
        marks = []
        if deviation is not None and (not count or deviation["chunk_count_differs"]):
            marks.append(pytest.mark.xfail(strict=True, reason=deviation["rule"]))
        params.append(pytest.param(path, id=path, marks=marks))
    return params


def test_gold_covers_the_vault(actual: dict[str, list[Row]]) -> None:
    """The gold lists exactly the imported notes (drafts/ is ignored) and is consistent with itself."""
    assert sorted(GOLD) == sorted(actual)
    assert len(GOLD) == 17
    for path, entry in GOLD.items():
        assert entry["chunk_count"] == len(entry["chunks"]), path


@pytest.mark.parametrize("path", _params(count=False))
def test_gold_chunks(path: str, actual: dict[str, list[Row]]) -> None:
    assert actual[path] == _gold_rows(path)


@pytest.mark.parametrize("path", _params(count=True))
def test_gold_chunk_count(path: str, actual: dict[str, list[Row]]) -> None:
    assert len(actual[path]) == GOLD[path]["chunk_count"]
