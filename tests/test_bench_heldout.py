"""The held-out msdocs cells of `bench/search.py heldout` (issue 15): questions nobody tuned on.

Their worth is that no choice ever sees them, so the tests pin exactly that (the `loo` cell list
never holds them) beside the file checks a typo would otherwise slip past: both files parse,
ids are unique and the German and English files judge the same notes under the same ids, every
judged note is in the slice rule's output, and no question repeats a judged note's title or
headings word for word (the questions are paraphrases; a copied heading would make BM25's job
trivial and the figure dishonest).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from conftest import corpus
from question_words import longest_shared_run, words

sys.path.insert(0, str(Path(__file__).parents[1] / "bench"))

import cells  # bench/cells.py: bench is a folder of scripts, not a package
import search as bench
from mindnet.evaluation import Metrics, load_vault_queries

GOLDEN = Path(__file__).parents[1] / "bench" / "golden"
FILES = ("msdocs-de.jsonl", "msdocs-en.jsonl")
CATEGORIES = {"factual", "howto", "troubleshooting", "concept", "where"}
SLICE_NOTES = 195
"""What `cells.MSDOCS_SLICE` selects from the shared corpus (its docstring says so too)."""


def _rows(name: str) -> list[dict[str, object]]:
    return [json.loads(line) for line in (GOLDEN / name).read_text(encoding="utf-8").splitlines() if line.strip()]


def test_both_files_parse_with_unique_ids_and_a_known_category() -> None:
    for name in FILES:
        raw = load_vault_queries(GOLDEN / name)
        ids = [q.query_id for q in raw]
        assert 50 <= len(raw) <= 60, name
        assert len(set(ids)) == len(ids), name
        assert {q.category for q in raw} <= CATEGORIES, name
        for q in raw:
            assert q.relevant, q.query_id
            assert not set(q.relevant) & set(q.partial), q.query_id


def test_german_and_english_questions_carry_the_same_ids_and_judgements() -> None:
    de, en = _rows(FILES[0]), _rows(FILES[1])
    assert [r["id"] for r in de] == [r["id"] for r in en]
    for a, b in zip(de, en, strict=True):
        assert (a["relevant"], a["partial"], a["category"]) == (b["relevant"], b["partial"], b["category"]), a["id"]
        assert a["query"] != b["query"], a["id"]


def test_loo_never_selects_on_a_held_out_cell() -> None:
    held = {c.name for c in cells.HELD_OUT}
    held_files = {c.questions for c in cells.MSDOCS_CELLS}
    assert held and held_files == set(FILES) and set(cells.MSDOCS_CELLS) <= set(cells.HELD_OUT)
    assert not held & {c.name for c in bench.loo_cells("")}
    assert not held_files & {c.questions for c in cells.CELLS}
    assert bench.loo_cells("msdocs") == []


def test_heldout_table_has_one_row_per_cell_and_run() -> None:
    m = Metrics(2, 0.5, 0.6, 0.75, 0.25, 1.0)
    results = {"a": {label: m for label, *_ in bench.HELD_OUT_ROWS}, "b": {"dense": m}}
    lines = bench.heldout_table(results, {"a": 2, "b": 2}).splitlines()
    assert len(lines) == 2 + len(bench.HELD_OUT_ROWS) + 1
    assert lines[-1] == "| b | 2 | dense | 0.500 | 0.600 | 0.750 | 0.250 | 1.000 |"


_FOLDERS = st.sampled_from((*cells.MSDOCS_SLICE, "Teams", "Skype/SfbServer", "Teams/devices"))
_NAMES = st.sampled_from(("a.md", "b.md", "sub/c.md", "notes.txt"))


@settings(max_examples=40, deadline=None)
@given(st.sets(st.tuples(_FOLDERS, _NAMES), max_size=10), st.sets(st.tuples(_FOLDERS, _NAMES), max_size=4))
def test_the_vault_holds_exactly_the_slice(tmp_path_factory: pytest.TempPathFactory, files: set[tuple[str, str]],
                                           stale: set[tuple[str, str]]) -> None:
    """Whatever the docs tree holds and whatever an earlier run left behind, the vault is the rule's output."""
    root = tmp_path_factory.mktemp("slice")
    docs, vault = root / "docs", root / "vault"
    for folder, name in files:
        (docs / folder / name).parent.mkdir(parents=True, exist_ok=True)
        (docs / folder / name).write_text(f"# {folder}/{name}\n", encoding="utf-8")
    for folder, name in stale:
        (vault / folder / name).parent.mkdir(parents=True, exist_ok=True)
        (vault / folder / name).write_text("old\n", encoding="utf-8")
    (docs / "Teams").mkdir(parents=True, exist_ok=True)
    for top in cells.MSDOCS_SLICE:
        (docs / top).mkdir(parents=True, exist_ok=True)
    cells.msdocs_vault(vault, docs)
    expected = {f"{folder}/{name}" for folder, name in files
                if folder in cells.MSDOCS_SLICE and name.endswith(".md")}
    assert set(cells.msdocs_slice_notes(docs)) == expected
    got = {p.relative_to(vault).as_posix() for p in vault.rglob("*.md")}
    assert got == expected
    for rel in expected:
        assert (vault / rel).read_bytes() == (docs / rel).read_bytes()


def test_a_missing_corpus_is_one_line_naming_the_folder(tmp_path: Path) -> None:
    (tmp_path / cells.MSDOCS_SLICE[0]).mkdir(parents=True)
    with pytest.raises(SystemExit, match=f"{tmp_path / cells.MSDOCS_SLICE[1]}: msdocs corpus folder not found"):
        cells.msdocs_vault(tmp_path / "vault", tmp_path)
    assert not (tmp_path / "vault").exists()


def test_every_judged_note_is_in_the_slice() -> None:
    docs = corpus("msdocs-skype-teams-de/docs")
    notes = set(cells.msdocs_slice_notes(docs))
    assert len(notes) == SLICE_NOTES
    for name in FILES:
        for q in load_vault_queries(GOLDEN / name):
            missing = [p for p in (*q.relevant, *q.partial) if p not in notes]
            assert not missing, (q.query_id, missing)


def test_no_german_question_repeats_a_judged_title_or_heading() -> None:
    """At most three consecutive words shared with any title or heading line of the notes it is judged on."""
    docs = corpus("msdocs-skype-teams-de/docs")
    for q in load_vault_queries(GOLDEN / FILES[0]):
        asked = words(q.query)
        for rel in (*q.relevant, *q.partial):
            lines = [ln for ln in (docs / rel).read_text(encoding="utf-8").splitlines()
                     if ln.startswith("#") or ln.startswith("title:")]
            worst = max((longest_shared_run(asked, words(ln)) for ln in lines), default=0)
            assert worst <= 3, (q.query_id, rel, worst)
