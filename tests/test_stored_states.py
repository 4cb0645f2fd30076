"""A resident keeps the stored notes' states between its imports (`sync.StoredStates`, issue 27).

A watching server is its embedded store's only writer, so it decides what a save changed from the states it
kept rather than from a facet and a scroll of the whole store. The states it keeps must be the store's after
every import, and an import that uses them must classify every note as one that asks the store does: a dry
run of the same index asks the store (it never uses kept states), so the two are compared step by step.
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fakes import FakeEmbedder
from mindnet import file_stat
from mindnet.api import Index
from mindnet.config import Settings
from mindnet.search import note_names
from mindnet.sync import ImportSummary, StoredStates
from mindnet.vault import read_vault

TITLES = ("Alpha", "Beta", "Gamma", "Delta", "Epsilon", "Zeta")


def _write_vault(root: Path) -> None:
    for i, title in enumerate(TITLES[:4]):
        nxt = TITLES[(i + 1) % 4]
        (root / f"{title.lower()}.md").write_text(
            f"---\ntags: [t{i}]\n---\n# {title}\n\nAbout {title}, see [[{nxt}]] and [[{TITLES[5]}]].\n\n"
            f"## Details\n\nMore about {title.lower()} here.\n", encoding="utf-8")


def _kept(index: Index) -> StoredStates:
    kept = index._stored_states
    assert kept is not None and kept.known
    return kept


def _stored(index: Index) -> StoredStates:
    stored = StoredStates()
    stored.read(index.store())
    return stored


def _same_states(index: Index) -> None:
    """The kept states and names are the store's, and so are the names a searcher after the last write gets."""
    kept, stored = _kept(index), _stored(index)
    assert kept.states() == stored.states()
    assert kept.ids_except(set()) == stored.ids_except(set())
    assert kept.rows() == stored.rows()
    written = index._written_names
    if written is not None and written[1] is not None:
        assert written[1] == note_names(index.store())
    elif written is not None:  # let go once the title index was made from them, for that version
        made = index._written_titles
        assert made is not None and made[0] == written[0]


def _classes(summary: ImportSummary) -> tuple[int, int, int, int]:
    return summary.notes_new, summary.notes_changed, summary.notes_deleted, summary.notes_unchanged


def _apply(root: Path, op: tuple[str, int, int]) -> None:
    """One edit a person makes between two saves' imports."""
    kind, i, j = op
    files = sorted(root.glob("*.md"))
    target = files[i % len(files)] if files else None
    if kind == "edit" and target:
        with target.open("a", encoding="utf-8") as fh:
            fh.write(f"\n\nA new paragraph {j}.\n")
    elif kind == "add":
        title = f"{TITLES[j % len(TITLES)]} {i}"
        (root / f"{title.lower().replace(' ', '-')}.md").write_text(
            f"# {title}\n\nNew note linking [[{TITLES[i % 4]}]].\n", encoding="utf-8")
    elif kind == "delete" and target and len(files) > 1:
        target.unlink()
    elif kind == "rename" and target:
        target.rename(root / f"moved-{j}-{target.name}")
    elif kind == "link" and target:
        with target.open("a", encoding="utf-8") as fh:
            fh.write(f"\n\nSee also [[{TITLES[j % len(TITLES)]}]].\n")
    elif kind == "retitle" and target:  # a new title and aliases, an area: what the title list names notes by
        target.write_text(f"---\naliases: [Name {j}, Other {i}]\narea: A{j % 2}\n---\n# Title {i}{j}\n\nText.\n",
                          encoding="utf-8")
    elif kind == "bad" and target:
        target.write_text("---\ntags: [unclosed\n---\n# Broken\n\nStill prose.\n", encoding="utf-8")


OPS = st.lists(st.tuples(st.sampled_from(["edit", "add", "delete", "rename", "link", "bad", "retitle", "none"]),
                         st.integers(0, 9), st.integers(0, 9)), min_size=1, max_size=5)


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ops=OPS)
def test_kept_states_are_the_stores_and_classify_as_the_store_does(ops: list[tuple[str, int, int]],
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(file_stat, "RACY_SECONDS", 0.0)
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "vault"
        root.mkdir()
        _write_vault(root)
        index = Index(root, Settings(), embedder=FakeEmbedder(), shared=True)
        try:
            index.keep_stored_states()
            index.import_vault(e5=False)
            _same_states(index)
            for op in ops:
                _apply(root, op)
                asked = index.import_vault(dry_run=True, e5=False)  # a dry run asks the store
                done = index.import_vault(e5=False)
                assert _classes(done) == _classes(asked), op
                _same_states(index)
                assert _classes(index.import_vault(e5=False))[:3] == (0, 0, 0)  # and nothing is left to do
            stored = {p.payload["path"]: p.payload["content_hash"]
                      for p in index.store().scroll("notes", fields=("path", "content_hash"))}
            assert stored == {n.path: n.content_hash for n in read_vault(root).notes}
        finally:
            index.close()


def test_a_failed_import_forgets_the_kept_states_and_the_next_converges(tmp_path: Path,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """An import that dies after writing part of its notes leaves states the next import must read again."""
    monkeypatch.setattr(file_stat, "RACY_SECONDS", 0.0)
    root = tmp_path / "vault"
    root.mkdir()
    _write_vault(root)
    index = Index(root, Settings(), embedder=FakeEmbedder(), shared=True)
    try:
        index.keep_stored_states()
        index.import_vault(e5=False)
        for title in ("alpha", "beta"):
            with (root / f"{title}.md").open("a", encoding="utf-8") as fh:
                fh.write("\n\nChanged.\n")
        (root / "gamma.md").unlink()
        store = index.store()
        upsert = store.upsert
        calls: list[str] = []

        def dying(collection: str, points: object) -> None:
            if collection == "notes":
                calls.append(collection)
                raise OSError("disk full")
            upsert(collection, points)

        monkeypatch.setattr(store, "upsert", dying)
        with pytest.raises(OSError):
            index.import_vault(e5=False)
        assert calls and not index._stored_states.known  # type: ignore[union-attr]
        monkeypatch.setattr(store, "upsert", upsert)
        done = index.import_vault(e5=False)
        assert (done.notes_changed, done.notes_deleted) == (2, 1)
        _same_states(index)
    finally:
        index.close()


def test_a_residents_searcher_after_a_save_names_notes_without_reading_every_note_point(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The title list's names after a save come from the kept states (`Index._keep_written_names`): a searcher made
    after each write read every note point's payload again, 0.8-1.7 s of the first search after a save at 30,000
    notes. The new note's title and alias are found, and no scroll of the notes is made for them."""
    monkeypatch.setattr(file_stat, "RACY_SECONDS", 0.0)
    root = tmp_path / "vault"
    root.mkdir()
    _write_vault(root)
    index = Index(root, Settings(store_path=str(tmp_path / "store")), embedder=FakeEmbedder(), shared=True)
    try:
        index.keep_stored_states()
        index.import_vault(e5=False)
        index.search("Alpha", k=3)
        (root / "omega.md").write_text("---\naliases: [Letzter Buchstabe]\n---\n# Omega\n\nThe end.\n",
                                       encoding="utf-8")
        assert index.import_vault(e5=False).notes_new == 1
        store = index.store()
        scroll, scrolled = store.scroll, []

        def counted(collection: str, *args: object, **kwargs: object) -> object:
            scrolled.append(collection)
            return scroll(collection, *args, **kwargs)

        monkeypatch.setattr(store, "scroll", counted)
        omega = next(p.id for p in scroll("notes", fields=("title",)) if p.payload["title"] == "Omega")
        assert [m.note_id for m in index.searcher().title_matches("wo steht der letzter buchstabe")] == [omega]
        assert [m.note_id for m in index.searcher().title_matches("omega")] == [omega]
        assert "notes" not in scrolled
        assert index._written_names is not None and index._written_names[1] is None  # the index holds them now
        made = index.searcher()._titles
        with (root / "alpha.md").open("a", encoding="utf-8") as fh:  # a save that names nothing anew
            fh.write("\n\nMore text.\n")
        assert index.import_vault(e5=False).notes_changed == 1
        scrolled.clear()  # an import reads the notes for its own reasons; a search must not
        searcher = index.searcher()
        assert searcher.title_matches("alpha") and made is not None and searcher._titles is not None
        assert searcher._titles[1] is made[1]  # the title index is kept, not made again
        (root / "alpha.md").write_text("# Alpha Prime\n\nRenamed.\n", encoding="utf-8")
        index.import_vault(e5=False)
        scrolled.clear()
        renamed = index.searcher().title_matches("alpha prime")
        assert renamed and renamed[0].words == 2 and index.searcher()._titles[1] is not made[1]
        assert "notes" not in scrolled
    finally:
        index.close()


def test_a_server_store_is_always_asked(tmp_path: Path) -> None:
    """A store by URL may have other writers: no states are kept for it."""
    root = tmp_path / "vault"
    root.mkdir()
    index = Index(root, Settings(qdrant_url="http://127.0.0.1:9"), embedder=FakeEmbedder())
    index.keep_stored_states()
    assert index._stored_states is None


def test_a_one_off_index_keeps_nothing(tmp_path: Path) -> None:
    root = tmp_path / "vault"
    shutil.copytree(Path(__file__).resolve().parents[1] / "examples" / "vault", root,
                    ignore=shutil.ignore_patterns(".mindnet"))
    with Index(root, Settings(store_path=str(tmp_path / "store")), embedder=FakeEmbedder()) as index:
        index.import_vault(e5=False)
        assert index._stored_states is None


class _CountedScrolls:
    """The real store, with its scrolls of every note (no filter) counted."""

    def __init__(self, store: object) -> None:
        self._store = store
        self.whole = 0

    def scroll(self, collection: str, flt: object = None, **options: object) -> object:
        self.whole += flt is None
        return self._store.scroll(collection, flt, **options)  # type: ignore[attr-defined]

    def count(self, collection: str) -> int:
        return self._store.count(collection)  # type: ignore[attr-defined]


@pytest.fixture(scope="module")
def imported(tmp_path_factory: pytest.TempPathFactory) -> object:
    root = tmp_path_factory.mktemp("langs") / "vault"
    shutil.copytree(Path(__file__).resolve().parents[1] / "examples" / "vault", root,
                    ignore=shutil.ignore_patterns(".mindnet"))
    index = Index(root, Settings(store_path=str(root.parent / "store")), embedder=FakeEmbedder())
    index.import_vault(e5=False)
    yield index
    index.close()


@settings(max_examples=60, deadline=None)
@given(picks=st.lists(st.integers(0, 40), max_size=40), bulk=st.integers(1, 6), share=st.integers(1, 20))
def test_stored_languages_answer_as_the_store_and_read_it_whole_only_when_cheaper(
        imported: Index, picks: list[int], bulk: int, share: int) -> None:
    """`StoredLanguages` gives each hash the language the store holds for it, looks each hash up once, and
    reads every note's language only after more distinct lookups than max(BULK, notes / BULK_SHARE)."""
    from mindnet.sync import StoredLanguages

    store = imported.store()
    held = {p.payload["content_hash"]: p.payload["lang"]
            for p in store.scroll("notes", fields=("content_hash", "lang"))}
    hashes = sorted(held) + [f"unknown-{i}" for i in range(24)]
    counted = _CountedScrolls(store)
    langs = StoredLanguages(counted)  # type: ignore[arg-type]
    langs.BULK, langs.BULK_SHARE = bulk, share
    limit = max(bulk, len(held) // share)
    asked: set[str] = set()
    for pick in picks:
        content_hash = hashes[pick % len(hashes)]
        asked.add(content_hash)
        assert langs.get(content_hash) == held.get(content_hash)
        assert counted.whole == (len(asked) > limit)  # read whole once, and only past the limit


@pytest.mark.parametrize("watch", [True, False])
def test_a_watching_resident_keeps_the_states_and_one_that_does_not_watch_asks(tmp_path: Path, watch: bool) -> None:
    from mindnet.service import Resident

    root = tmp_path / "vault"
    root.mkdir()
    resident = Resident(root, Settings(store_path=str(tmp_path / "store")), watch=watch, e5=False,
                        embedder=FakeEmbedder())
    try:
        assert (resident.index._stored_states is not None) is watch
    finally:
        resident.index.close()


def _files(root: Path) -> dict[str, str]:
    """Each note file's text by its vault path: two of them tell which files a watcher would report."""
    return {p.name: p.read_text(encoding="utf-8") for p in root.glob("*.md")}


def _points(index: Index) -> dict[str, dict[str, dict[str, object]]]:
    """Every stored point's payload by collection: edges, and the chunks' and notes' resolved links."""
    return {name: {p.id: p.payload for p in index.store().scroll(name)} for name in ("edges", "chunks", "notes")}


@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ops=st.lists(st.tuples(st.sampled_from(["edit", "add", "delete", "rename", "link", "bad", "alias"]),
                              st.integers(0, 9), st.integers(0, 9)), min_size=1, max_size=5),
       reads=st.booleans())
def test_a_kept_resolver_links_every_save_as_a_new_import_would(ops: list[tuple[str, int, int]], reads: bool,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """A watching resident refreshes one link resolver between its imports (`Index.keep_resolver`) instead
    of building one over the vault for each save. After every save (edits, new notes, deletions, renames,
    links, an alias that a forward link names) its edges, chunks and notes (their resolved links) must be those a
    new import of the same vault makes; with `reads`, as a watching resident imports, each save reads only the
    files that changed (`Index.keep_reads`, `import_vault(changed=…)`)."""
    monkeypatch.setattr(file_stat, "RACY_SECONDS", 0.0)
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "vault"
        root.mkdir()
        _write_vault(root)
        index = Index(root, Settings(store_path=str(Path(tmp) / "kept")), embedder=FakeEmbedder(), shared=True)
        try:
            index.keep_resolver()
            if reads:
                index.keep_reads()
            index.import_vault(e5=False)
            for step, (kind, i, j) in enumerate(ops):
                before = _files(root)
                if kind == "alias":
                    alias = TITLES[(i + j) % len(TITLES)]
                    (root / f"named-{i}.md").write_text(f"---\naliases: [{alias}]\n---\n# Named {i}\n\nText.\n",
                                                        encoding="utf-8")
                else:
                    _apply(root, (kind, i, j))
                after = _files(root)
                changed = {rel for rel in before.keys() | after.keys() if before.get(rel) != after.get(rel)}
                index.import_vault(e5=False, changed=changed if reads else None)
                with Index(root, Settings(store_path=str(Path(tmp) / f"new-{step}")), embedder=FakeEmbedder()) as new:
                    new.import_vault(e5=False)
                    assert _points(index) == _points(new), (kind, i, j)
            assert index._kept_resolver is not None and index._kept_resolver.built
        finally:
            index.close()
