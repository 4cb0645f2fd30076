"""The note names kept beside the store (`name_file`): trusted only at the generation they were read at.

A one-off search reads the title list's names from `names.json` instead of opening the notes
collection (issue 26); a stale file would make it miss or invent a note's name, so every test here
is about when the file may be used.
"""

from __future__ import annotations

import json
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from fakes import FakeEmbedder
from mindnet import Index, name_file
from mindnet.search import note_names

_pairs = st.lists(st.tuples(st.text(min_size=1, max_size=6), st.text(max_size=12)), max_size=6).map(tuple)


def test_names_are_used_only_at_the_generation_they_were_read_at(tmp_path: Path) -> None:
    names = ((("a", "Alpha"), ("a", "Alias")), (("a", "Projekt"),))
    assert name_file.generation(tmp_path) is None  # a folder no writer has marked: nothing is trusted
    name_file.end_writing(tmp_path)
    seen = name_file.generation(tmp_path)
    assert seen is not None
    name_file.write_names(tmp_path, "m", seen, names)
    assert name_file.read_names(tmp_path, "m", seen) == names
    name_file.begin_writing(tmp_path)
    assert name_file.generation(tmp_path) is None  # an import runs (or crashed): no generation is current
    name_file.write_names(tmp_path, "m", seen, (((("b", "Beta"),)), ()))  # a reader that saw the old one writes nothing
    assert name_file.read_names(tmp_path, "m", seen) == names
    name_file.end_writing(tmp_path)
    after = name_file.generation(tmp_path)
    assert after is not None and after != seen
    assert name_file.read_names(tmp_path, "m", after) is None  # what was kept before the import is not used


@given(names=_pairs, groups=_pairs)
def test_kept_names_read_back_as_written(tmp_path_factory: object, names: tuple[tuple[str, str], ...],
                                         groups: tuple[tuple[str, str], ...]) -> None:
    folder = tmp_path_factory.mktemp("names")  # type: ignore[attr-defined]
    name_file.end_writing(folder)
    seen = name_file.generation(folder)
    assert seen is not None
    name_file.write_names(folder, "m", seen, (names, groups))
    assert name_file.read_names(folder, "m", seen) == (names, groups)


def test_a_damaged_or_foreign_file_is_not_used(tmp_path: Path) -> None:
    name_file.end_writing(tmp_path)
    seen = name_file.generation(tmp_path)
    assert seen is not None
    foreign = {"format": 99, "generation": seen, "writer": None, "names": [], "groups": []}
    short_pair = {"format": 1, "generation": seen, "writer": None, "names": [["a"]], "groups": []}
    for text in ("{not json", "[]", json.dumps(foreign), json.dumps(short_pair)):
        (tmp_path / name_file.NAMES_FILE.format(prefix="m")).write_text(text, encoding="utf-8")
        assert name_file.read_names(tmp_path, "m", seen) is None, text


def _vault(tmp_path: Path) -> Path:
    root = tmp_path / "vault"
    root.mkdir()
    (root / "rrf.md").write_text("---\naliases: [RRF]\n---\n# Reciprocal Rank Fusion\n\nRanks lists.\n",
                                 encoding="utf-8")
    (root / "notes.md").write_text("# Chunking\n\nNotes become chunks.\n", encoding="utf-8")
    return root


def test_a_one_off_search_keeps_the_names_and_then_opens_no_notes_collection(tmp_path: Path) -> None:
    vault = _vault(tmp_path)
    with Index(vault, embedder=FakeEmbedder()) as index:
        index.import_vault()
        resident = note_names(index.store())
    first = Index(vault, embedder=FakeEmbedder(), short_lived=True)
    first.prepare_search()
    assert "notes" in first.store()._shards  # type: ignore[attr-defined]  # no file yet: read from the store
    first.close()
    second = Index(vault, embedder=FakeEmbedder(), short_lived=True)
    second.prepare_search()
    assert "notes" not in second.store()._shards  # type: ignore[attr-defined]
    assert second.searcher().title_matches("how does RRF work")[0].note_id == "rrf"
    assert second._kept_names() == resident
    second.close()


def test_an_import_makes_the_kept_names_stale(tmp_path: Path) -> None:
    vault = _vault(tmp_path)
    with Index(vault, embedder=FakeEmbedder()) as index:
        index.import_vault()
    with Index(vault, embedder=FakeEmbedder(), short_lived=True) as once:
        once.prepare_search()  # keeps the names
    (vault / "notes.md").write_text("# Zerlegung\n\nNotizen werden zerlegt.\n", encoding="utf-8")
    with Index(vault, embedder=FakeEmbedder()) as index:
        index.import_vault()
    with Index(vault, embedder=FakeEmbedder(), short_lived=True) as again:
        assert [n.note_id for n in again.searcher().title_matches("Zerlegung")] == ["notes"]
        assert again.searcher().title_matches("Chunking") == []


def test_a_one_off_index_that_imports_then_searches_sees_its_own_names(tmp_path: Path) -> None:
    vault = _vault(tmp_path)
    with Index(vault, embedder=FakeEmbedder()) as resident:
        resident.import_vault()
    with Index(vault, embedder=FakeEmbedder(), short_lived=True) as index:
        index.prepare_search()  # keeps the names of this generation
        (vault / "notes.md").write_text("# Zerlegung\n\nNotizen werden zerlegt.\n", encoding="utf-8")
        index.import_vault()
        assert [n.note_id for n in index.searcher().title_matches("Zerlegung")] == ["notes"]
        assert index.searcher().title_matches("Chunking") == []


def test_names_are_kept_per_collection_set_and_dropped_by_any_writer_record(tmp_path: Path) -> None:
    """Two prefixes in one folder keep their own names; an import by a mindnet older than the generation
    file still rewrites `writer.json`, and that alone makes the kept names stale."""
    from mindnet.config import record_writer

    record_writer(tmp_path)
    name_file.end_writing(tmp_path)
    seen = name_file.generation(tmp_path)
    assert seen is not None
    a, b = ((("a", "Alpha"),), ()), ((("b", "Beta"),), ())
    name_file.write_names(tmp_path, "one", seen, a)
    name_file.write_names(tmp_path, "two", seen, b)
    assert name_file.read_names(tmp_path, "one", seen) == a and name_file.read_names(tmp_path, "two", seen) == b
    record_writer(tmp_path)  # what an older import does, and nothing else
    assert name_file.read_names(tmp_path, "one", seen) is None


def test_a_dry_run_and_an_import_that_wrote_nothing_keep_the_generation(tmp_path: Path) -> None:
    """What `serve` and `mcp` do first on start is an import that usually finds nothing to do: it must not make
    the kept names stale, or every start read the notes collection again (issue 26)."""
    vault = _vault(tmp_path)
    with Index(vault, embedder=FakeEmbedder()) as index:
        index.import_vault()
        seen = name_file.generation(index.folder)
        writer = (index.folder / "writer.json").stat().st_ino
        index.import_vault(dry_run=True)
        assert seen is not None and name_file.generation(index.folder) == seen
        searcher = index.searcher()
        index.import_vault()  # nothing changed: nothing written
        assert name_file.generation(index.folder) == seen
        assert (index.folder / "writer.json").stat().st_ino == writer
        assert index.searcher() is searcher  # and its title index stays
        (vault / "notes.md").write_text("# Zerlegung\n\nNotizen werden zerlegt.\n", encoding="utf-8")
        index.import_vault()
        assert name_file.generation(index.folder) not in (None, seen)
        assert (index.folder / "writer.json").stat().st_ino != writer
        assert index.searcher() is not searcher


def test_a_resident_reads_names_once_and_again_after_its_own_import(tmp_path: Path) -> None:
    """A resident over an embedded store (only it can write there) reads the names once per searcher, not
    an exact count of the notes per search; an import through it gives the next search the new names."""
    vault = _vault(tmp_path)
    with Index(vault, embedder=FakeEmbedder(), shared=True) as index:
        index.import_vault()
        index.search("chunking")
        counted: list[str] = []
        store = index.searcher().store
        real_count = store.count

        def count(collection: str, *args: object, **kwargs: object) -> int:
            counted.append(collection)
            return real_count(collection, *args, **kwargs)

        store.count = count  # type: ignore[method-assign]
        for query in ("chunking", "Zerlegung", "wie zerlege ich Notizen"):
            index.search(query)
        assert "notes" not in counted
        (vault / "notes.md").write_text("# Zerlegung\n\nNotizen werden zerlegt.\n", encoding="utf-8")
        index.import_vault()
        assert [n.note_id for n in index.searcher().title_matches("Zerlegung")] == ["notes"]
        assert index.searcher().title_matches("Chunking") == []


def test_a_residents_warm_up_reads_the_kept_names_and_opens_no_notes_collection(tmp_path: Path) -> None:
    """`serve` and `mcp` warm up before they say ready: with the names file current, that warm-up loads no
    notes collection (a third of it after the models, issue 26). A resident keeps no file itself."""
    vault = _vault(tmp_path)
    with Index(vault, embedder=FakeEmbedder()) as index:
        index.import_vault()
        folder, names = index.folder, note_names(index.store())
    file = folder / name_file.NAMES_FILE.format(prefix="mindnet")
    with Index(vault, embedder=FakeEmbedder(), shared=True) as resident:
        resident.prepare_search()
        assert "notes" in resident.store()._shards  # type: ignore[attr-defined]  # no file yet
    assert not file.exists()  # a resident does not write it
    with Index(vault, embedder=FakeEmbedder(), short_lived=True) as once:
        once.prepare_search()  # a one-off search keeps the names
    assert file.exists()
    with Index(vault, embedder=FakeEmbedder(), shared=True) as resident:
        resident.warm_up()
        assert "notes" not in resident.store()._shards  # type: ignore[attr-defined]
        assert resident._kept_names() == names
        assert resident.searcher().title_matches("how does RRF work")[0].note_id == "rrf"


def test_an_e5_fill_with_nothing_to_embed_keeps_the_generation_and_the_writer(tmp_path: Path) -> None:
    """A resident's fill runs after its imports: one that finds every chunk filled writes nothing, and the
    names kept at the store's generation, which also name the writer record, stay good."""
    vault = _vault(tmp_path)
    with Index(vault, embedder=FakeEmbedder(), e5=FakeEmbedder(dim=16, model_id="fake-e5@1")) as index:
        index.import_vault(e5=False)
        seen, writer = name_file.generation(index.folder), (index.folder / "writer.json").stat().st_ino
        assert index.fill_e5() > 0  # writes the tier: a new generation and writer record
        filled, writer_after = name_file.generation(index.folder), (index.folder / "writer.json").stat().st_ino
        assert filled not in (None, seen) and writer_after != writer
        assert index.fill_e5() == 0
        assert name_file.generation(index.folder) == filled
        assert (index.folder / "writer.json").stat().st_ino == writer_after
