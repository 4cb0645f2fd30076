"""The zettlr-docs cells of `bench/search.py heldout` (issue 25): report-only questions on a help vault.

The questions were committed before any search change they judge, so what matters is that they stay
out of every selection (`loo` reads `cells.CELLS` only) and that their judgements hold in every
vault a cell searches: both files parse, the German file judges exactly what the English one judges,
every judged path is a note of the English vault (and every `mixed` judgement a note of the mixed
vault), the mixed vault is exactly its rule's output, and no question (keyword ones aside) copies
more than three consecutive words of a heading or title of a note it is judged on.
"""

from __future__ import annotations

import json
import sys
from collections import Counter
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from conftest import corpus
from question_words import longest_shared_run, words

sys.path.insert(0, str(Path(__file__).parents[1] / "bench"))

import cells  # bench/cells.py: bench is a folder of scripts, not a package
import search as bench
from mindnet.evaluation import load_vault_queries

GOLDEN = Path(__file__).parents[1] / "bench" / "golden"
EN, DE = "zettlr-en.jsonl", "zettlr-de.jsonl"
CATEGORIES = {"keyword", "howto", "conceptual", "troubleshooting"}
ENGLISH_PAGES, MIXED_NOTES = 83, 86
"""The corpus's English pages, and the mixed vault: those pages plus the three German pages that
replace none (`cells.ZETTLR_TRANSLATIONS`)."""
MIN_ON_GERMAN_PAGES = 25
"""Questions whose answer is on a page the mixed vault holds in German, in both versions (issue 25)."""


def _rows(name: str) -> list[dict[str, object]]:
    return [json.loads(line) for line in (GOLDEN / name).read_text(encoding="utf-8").splitlines() if line.strip()]


def _judgements(row: dict[str, object]) -> dict[str, tuple[list[str], list[str]]]:
    """The row's judgements per vault: (relevant, partial) in the English vault and in the mixed one."""
    mixed = row.get("mixed", row)
    assert isinstance(mixed, dict)
    return {"en": (row["relevant"], row["partial"]), "mixed": (mixed["relevant"], mixed["partial"])}  # type: ignore[dict-item]


def _judged(row: dict[str, object], vault: str) -> set[str]:
    """Every note judged (relevant or partial) for the row in `vault` ("en" or "mixed")."""
    relevant, partial = _judgements(row)[vault]
    return {*relevant, *partial}


def _swapped() -> set[str]:
    """Paths of English pages the mixed vault holds in German."""
    return {at for _, at in cells.ZETTLR_TRANSLATIONS}


def test_both_files_parse_with_unique_ids_and_a_quarter_per_category() -> None:
    for name in (EN, DE):
        raw = load_vault_queries(GOLDEN / name)
        ids = [q.query_id for q in raw]
        assert 70 <= len(raw) <= 80, name
        assert len(set(ids)) == len(ids), name
        counts = Counter(q.category for q in raw)
        assert set(counts) == CATEGORIES, name
        assert all(len(raw) / 4 - 5 <= n <= len(raw) / 4 + 5 for n in counts.values()), counts
        for row in _rows(name):
            for vault, (relevant, partial) in _judgements(row).items():
                assert relevant or vault == "mixed", row["id"]
                assert not set(relevant) & set(partial), (row["id"], vault)
                assert len(set(relevant)) == len(relevant) and len(set(partial)) == len(partial), row["id"]


def test_german_and_english_questions_carry_the_same_ids_and_judgements() -> None:
    de, en = _rows(DE), _rows(EN)
    assert [r["id"] for r in de] == [r["id"] for r in en]
    for a, b in zip(de, en, strict=True):
        assert set(a) == set(b), a["id"]
        assert {k: v for k, v in a.items() if k != "query"} == {k: v for k, v in b.items() if k != "query"}, a["id"]
        assert a["query"] != b["query"] or a["category"] == "keyword", a["id"]  # `nocite` is `nocite` in German too


def test_a_mixed_judgement_differs_only_on_notes_the_mixed_vault_changed() -> None:
    """Rows carry `mixed` only where a German page answers otherwise; every other note is the same file."""
    german_at = _swapped()
    for row in _rows(EN):
        if "mixed" not in row:
            continue
        (rel, part), (m_rel, m_part) = _judgements(row)["en"], _judgements(row)["mixed"]
        assert (rel, part) != (m_rel, m_part), row["id"]
        gains = {**dict.fromkeys(part, 0.5), **dict.fromkeys(rel, 1.0)}
        m_gains = {**dict.fromkeys(m_part, 0.5), **dict.fromkeys(m_rel, 1.0)}
        changed = {p for p in gains.keys() | m_gains.keys() if gains.get(p) != m_gains.get(p)}
        assert changed <= german_at, (row["id"], changed - german_at)


def test_the_mixed_cells_ask_each_question_under_its_mixed_judgements(tmp_path: Path) -> None:
    path = tmp_path / "q.jsonl"
    rows = [{"id": "a", "query": "qa", "relevant": ["x.md"], "partial": ["y.md"], "category": "howto"},
            {"id": "b", "query": "qb", "relevant": ["x.md"], "partial": [], "category": "keyword",
             "mixed": {"relevant": ["z.md"], "partial": ["x.md"]}},
            {"id": "c", "query": "qc", "relevant": ["x.md"], "partial": [], "category": "keyword",
             "mixed": {"relevant": [], "partial": ["y.md"]}}]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    english = cells.zettlr_rows(path, mixed=False)
    mixed = cells.zettlr_rows(path, mixed=True)
    assert [(q.query_id, q.relevant, q.partial) for q in english] == [
        ("a", ("x.md",), ("y.md",)), ("b", ("x.md",), ()), ("c", ("x.md",), ())]
    assert [(q.query_id, q.relevant, q.partial, q.category) for q in mixed] == [
        ("a", ("x.md",), ("y.md",), "howto"), ("b", ("z.md",), ("x.md",), "keyword")]


def test_zettlr_cells_are_report_only_and_judged_in_their_vault() -> None:
    names = {c.name: c for c in cells.ZETTLR_CELLS}
    assert set(names) == {"zettlr en→en", "zettlr de→en", "zettlr en→mixed", "zettlr de→mixed"}
    assert set(cells.ZETTLR_CELLS) <= set(cells.HELD_OUT)
    assert {c.questions for c in cells.ZETTLR_CELLS} == {EN, DE}
    assert all(c.mixed == (c.corpus == "zettlr-mixed") for c in cells.ZETTLR_CELLS)


def test_loo_never_selects_on_a_zettlr_cell() -> None:
    assert not {c.name for c in cells.ZETTLR_CELLS} & {c.name for c in bench.loo_cells("")}
    assert not {EN, DE} & {c.questions for c in cells.CELLS}
    assert not {"zettlr-en", "zettlr-mixed"} & {c.corpus for c in cells.CELLS}
    assert bench.loo_cells("zettlr") == []


def test_heldout_cells_by_prefix() -> None:
    assert bench.heldout_cells("zettlr") == list(cells.ZETTLR_CELLS)
    assert bench.heldout_cells("") == list(cells.HELD_OUT)
    assert bench.heldout_cells("msdocs,zettlr de") == [*cells.MSDOCS_CELLS, cells.ZETTLR_CELLS[1],
                                                      cells.ZETTLR_CELLS[3]]
    with pytest.raises(SystemExit, match="no report-only cell starts with zetlr"):
        bench.heldout_cells("zettlr,zetlr")


def test_the_translation_map_names_every_german_page_once() -> None:
    docs = corpus("zettlr-docs/docs")
    german = sorted(p.relative_to(docs / "de").as_posix() for p in (docs / "de").rglob("*.md"))
    assert sorted(g for g, _ in cells.ZETTLR_TRANSLATIONS) == german
    targets = [at for _, at in cells.ZETTLR_TRANSLATIONS]
    assert len(set(targets)) == len(targets)
    replaced = [at for at in targets if (docs / "en" / at).is_file()]
    assert len(replaced) == len(targets) - (MIXED_NOTES - ENGLISH_PAGES)


def test_every_judged_note_is_in_its_vault() -> None:
    docs = corpus("zettlr-docs/docs")
    english = {p.relative_to(docs / "en").as_posix() for p in (docs / "en").rglob("*.md")}
    mixed = set(cells.zettlr_mixed_sources(docs))
    assert len(english) == ENGLISH_PAGES and len(mixed) == MIXED_NOTES
    for row in _rows(EN):
        assert not _judged(row, "en") - english, row["id"]
        assert not _judged(row, "mixed") - mixed, row["id"]


def test_enough_questions_are_answered_on_a_page_that_exists_in_german() -> None:
    """A question counts when a relevant page is one the mixed vault holds in German and stays
    relevant there: the German translation answers it too (so English questions meet German notes)."""
    german_at = _swapped()
    counted = [row["id"] for row in _rows(EN)
               if set(row["relevant"]) & german_at & set(_judgements(row)["mixed"][0])]  # type: ignore[arg-type]
    assert len(counted) >= MIN_ON_GERMAN_PAGES


def test_the_mixed_vault_is_the_rule_on_the_real_corpus(tmp_path: Path) -> None:
    docs = corpus("zettlr-docs/docs")
    vault = cells.zettlr_mixed_vault(tmp_path / "vault", docs)
    got = {p.relative_to(vault).as_posix() for p in vault.rglob("*.md")}
    assert len(got) == MIXED_NOTES
    german = dict(cells.ZETTLR_TRANSLATIONS)
    by_target = {at: de for de, at in german.items()}
    for rel in got:
        source = docs / "de" / by_target[rel] if rel in by_target else docs / "en" / rel
        assert (vault / rel).read_bytes() == source.read_bytes(), rel
    assert (vault / "reference/settings.md").read_text(encoding="utf-8").startswith("# Einstellungen")


_EN_NAMES = st.sampled_from(("a.md", "editor/b.md", "reference/settings.md", "index.md", "x/notes.txt"))
_STALE = st.sampled_from(("old.md", "editor/gone.md", "reference/settings.md", "guides/guide-ide.md"))


@settings(max_examples=30, deadline=None)
@given(st.sets(_EN_NAMES, max_size=5), st.sets(_STALE, max_size=3))
def test_the_mixed_vault_holds_exactly_the_rule(tmp_path_factory: pytest.TempPathFactory, english: set[str],
                                               stale: set[str]) -> None:
    """Whatever the English side holds and whatever an earlier run left behind, the vault is the rule's output."""
    root = tmp_path_factory.mktemp("zettlr")
    docs, vault = root / "docs", root / "vault"
    for german, _ in cells.ZETTLR_TRANSLATIONS:
        (docs / "de" / german).parent.mkdir(parents=True, exist_ok=True)
        (docs / "de" / german).write_text(f"# de {german}\n", encoding="utf-8")
    (docs / "en").mkdir(parents=True)
    for rel in english:
        (docs / "en" / rel).parent.mkdir(parents=True, exist_ok=True)
        (docs / "en" / rel).write_text(f"# en {rel}\n", encoding="utf-8")
    for rel in stale:
        (vault / rel).parent.mkdir(parents=True, exist_ok=True)
        (vault / rel).write_text("old\n", encoding="utf-8")
    cells.zettlr_mixed_vault(vault, docs)
    targets = {at: german for german, at in cells.ZETTLR_TRANSLATIONS}
    expected = {rel for rel in english if rel.endswith(".md")} | set(targets)
    assert {p.relative_to(vault).as_posix() for p in vault.rglob("*.md")} == expected
    for rel in expected:
        want = f"# de {targets[rel]}\n" if rel in targets else f"# en {rel}\n"
        assert (vault / rel).read_text(encoding="utf-8") == want, rel


def test_a_missing_corpus_is_one_line_naming_the_folder(tmp_path: Path) -> None:
    (tmp_path / "en").mkdir()
    with pytest.raises(SystemExit, match=f"{tmp_path / 'de'}: zettlr-docs corpus folder not found"):
        cells.zettlr_mixed_vault(tmp_path / "vault", tmp_path)
    (tmp_path / "de").mkdir()
    with pytest.raises(SystemExit, match="German page of the zettlr-docs corpus not found"):
        cells.zettlr_mixed_vault(tmp_path / "vault", tmp_path)
    assert not (tmp_path / "vault").exists()


def test_no_question_repeats_a_judged_title_or_heading() -> None:
    """Keyword questions aside, at most three consecutive words shared with any heading or title line
    of a note the question is judged on, in the English vault and (German pages) in the mixed one."""
    docs = corpus("zettlr-docs/docs")
    mixed = cells.zettlr_mixed_sources(docs)
    for name in (EN, DE):
        for row in _rows(name):
            if row["category"] == "keyword":
                continue
            files = {docs / "en" / p for p in _judged(row, "en")} | {mixed[p] for p in _judged(row, "mixed")}
            asked = words(str(row["query"]))
            for path in files:
                lines = [ln for ln in path.read_text(encoding="utf-8").splitlines()
                         if ln.startswith("#") or ln.startswith("title:")]
                worst = max((longest_shared_run(asked, words(ln)) for ln in lines), default=0)
                assert worst <= 3, (row["id"], name, path.relative_to(docs).as_posix(), worst)
