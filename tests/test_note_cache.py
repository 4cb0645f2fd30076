"""The parsed-notes cache: a warm read re-reads only changed files and returns exactly what a cold read does."""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fakes import FakeEmbedder
from mindnet import file_stat, note_cache, sync, vault
from mindnet.api import Index
from mindnet.config import Settings
from mindnet.note_cache import NoteCache
from mindnet.vault import read_vault

SAMPLE = Path(__file__).resolve().parents[1] / "examples" / "vault"


@pytest.fixture
def notes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A copy of the sample vault whose files count as old enough to cache (not racy)."""
    monkeypatch.setattr(file_stat, "RACY_SECONDS", 0.0)
    root = tmp_path / "vault"
    shutil.copytree(SAMPLE, root, ignore=shutil.ignore_patterns(".mindnet"))
    return root


class Reads:
    """Counts the files `read_vault` really opens."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.paths: list[str] = []
        original = vault.read_note

        def counting(path: Path, rel: str, *args: object, **kwargs: object) -> vault.Note:
            self.paths.append(rel)
            return original(path, rel, *args, **kwargs)  # type: ignore[arg-type]

        monkeypatch.setattr(vault, "read_note", counting)


def cached_read(root: Path, settings: Settings | None = None) -> vault.VaultResult:
    cache = NoteCache(root / ".mindnet" / "notes.sqlite", settings or Settings())
    try:
        result = read_vault(root, settings, cache=cache)
        cache.save()
        return result
    finally:
        cache.close()


def test_warm_read_opens_no_file_and_equals_a_cold_read(notes: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    first = cached_read(notes)
    reads = Reads(monkeypatch)
    second = cached_read(notes)
    assert reads.paths == []
    assert second == first == read_vault(notes)
    assert len(second.notes) == 17


def test_an_edited_file_is_read_again_and_only_it(notes: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cached_read(notes)
    path = notes / "concepts/rrf.md"
    st = path.stat()
    text = path.read_text(encoding="utf-8")
    path.write_text(text.replace("RRF", "RRG", 1), encoding="utf-8")
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))  # same mtime: the size or ctime still tells
    reads = Reads(monkeypatch)
    result = cached_read(notes)
    assert reads.paths == ["concepts/rrf.md"]
    assert result == read_vault(notes)


def test_recent_files_are_not_trusted_by_their_stat(notes: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(file_stat, "RACY_SECONDS", 3600.0)  # every file counts as just written
    cached_read(notes)
    reads = Reads(monkeypatch)
    cached_read(notes)
    assert len(reads.paths) == 17


def test_deleted_and_added_files(notes: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cached_read(notes)
    (notes / "concepts/rrf.md").unlink()
    (notes / "neu.md").write_text("# Neu\n\nText.\n", encoding="utf-8")
    reads = Reads(monkeypatch)
    result = cached_read(notes)
    assert reads.paths == ["neu.md"]
    assert result == read_vault(notes)
    (notes / "concepts/rrf.md").write_text("# Zurück\n", encoding="utf-8")
    assert "concepts/rrf.md" in {n.path for n in cached_read(notes).notes}


def test_a_file_that_turned_bad_is_reported(notes: Path) -> None:
    cached_read(notes)
    (notes / "concepts/rrf.md").write_bytes(b"---\ntitle: [unclosed\n---\nText\n")
    result = cached_read(notes)
    assert [p.path for p in result.problems if p.severity == "error"] == ["concepts/rrf.md"]


def test_another_setting_or_a_corrupt_file_drops_the_cache(notes: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cached_read(notes)
    reads = Reads(monkeypatch)
    cached_read(notes, Settings(strict=True))
    assert len(reads.paths) == 17
    (notes / ".mindnet" / "notes.sqlite").write_bytes(b"not a database")
    cold = read_vault(notes)
    reads.paths.clear()
    assert cached_read(notes) == cold
    assert len(reads.paths) == 17
    reads.paths.clear()
    assert cached_read(notes) == cold
    assert reads.paths == []  # rebuilt


def test_frontmatter_that_json_cannot_hold_is_read_every_time(notes: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (notes / "odd.md").write_text("---\n1: one\nwhen: !!timestamp 2024-01-02\n---\nText\n", encoding="utf-8")
    first = cached_read(notes)
    reads = Reads(monkeypatch)
    second = cached_read(notes)
    assert reads.paths == ["odd.md"]
    assert second == first


STEPS = st.lists(st.tuples(st.sampled_from(["edit", "delete", "add"]), st.integers(0, 40)), max_size=6)


def _take_step(root: Path, step: str, n: int, with_id: bool = False) -> None:
    """One of `STEPS` done to the vault: append to, delete or add a note ("read" changes nothing)."""
    files = sorted(p for p in root.rglob("*.md") if ".mindnet" not in p.parts)
    if step == "edit":
        with files[n % len(files)].open("a", encoding="utf-8") as fh:
            fh.write(f"\n\nZeile {n} [[Neu {n}]]\n")
    elif step == "delete" and len(files) > 1:
        files[n % len(files)].unlink()
    elif step == "add":
        note_id = f"id: neu-{n}\n" if with_id else ""
        (root / f"neu-{n}.md").write_text(f"---\ntitle: Neu {n}\n{note_id}---\n# Neu\n\nText {n}.\n", encoding="utf-8")


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(steps=STEPS)
def test_kept_slim_notes_equal_a_cold_slim_read(monkeypatch: pytest.MonkeyPatch, steps: list[tuple[str, int]]) -> None:
    """A resident's cache (`keep_slim`) hands over slim notes from memory: through edits, deletions and new
    files every read equals a cold slim read, and a read after which nothing changed decodes no row."""
    monkeypatch.setattr(file_stat, "RACY_SECONDS", 0.0)
    decoded: list[object] = []
    original = note_cache._note
    monkeypatch.setattr(note_cache, "_note", lambda row: decoded.append(row) or original(row))
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "vault"
        shutil.copytree(SAMPLE, root, ignore=shutil.ignore_patterns(".mindnet"))
        cache = NoteCache(root / ".mindnet" / "notes.sqlite", Settings())
        cache.keep_slim()
        try:
            for step, n in [("read", 0), *steps]:
                _take_step(root, step, n)
                result = read_vault(root, cache=cache, slim=True)
                cache.save()
                assert result == read_vault(root, slim=True)
            decoded.clear()
            assert read_vault(root, cache=cache, slim=True) == read_vault(root, slim=True)
            assert decoded == []  # every unchanged note came from memory
        finally:
            cache.close()


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(steps=STEPS)
def test_slim_reads_from_the_table_equal_a_cold_slim_read(monkeypatch: pytest.MonkeyPatch,
                                                         steps: list[tuple[str, int]]) -> None:
    """A one-off import reads every note slim from the table (its `slim` column, in one query): through edits,
    deletions and new files each such read equals a cold slim read, and one after which nothing changed
    decodes no whole note (a body). So does every read of one long-lived cache (an index kept open without
    slim notes in memory), whose rows read at once must not outlive the rows written after them."""
    monkeypatch.setattr(file_stat, "RACY_SECONDS", 0.0)
    decoded: list[dict[str, Any]] = []
    original = note_cache._note
    monkeypatch.setattr(note_cache, "_note", lambda row: decoded.append(row) or original(row))
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "vault"
        shutil.copytree(SAMPLE, root, ignore=shutil.ignore_patterns(".mindnet"))
        kept = NoteCache(Path(tmp) / "kept.sqlite", Settings())
        kept.autosave = True  # as an import that writes sets it
        for step, n in [("read", 0), *steps, ("read", 0)]:
            _take_step(root, step, n, with_id=True)  # an id: the one frontmatter key a slim note keeps
            cache = NoteCache(root / ".mindnet" / "notes.sqlite", Settings())
            try:
                decoded.clear()
                result = read_vault(root, cache=cache, slim=True)
                cache.save()
                fresh = list(decoded)
            finally:
                cache.close()
            cold = read_vault(root, slim=True)
            assert result == cold
            from_kept = read_vault(root, cache=kept, slim=True)
            kept.save()
            assert from_kept == cold
        kept.close()
        assert len(fresh) == len(result.notes) and not any(row["fulltext"] for row in fresh)
        assert not any(row["fulltext"] for row in decoded)  # nor did the long-lived cache's last read


def test_a_write_that_fails_never_serves_the_older_row(notes: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A row that could not be written (the table locked by another connection past its timeout) leaves the older
    row of that file in place: the cache must read the file again, not hand out the older note."""
    import sqlite3

    cached_read(notes)
    cache = NoteCache(notes / ".mindnet" / "notes.sqlite", Settings())
    try:
        target = notes / "concepts" / "rrf.md"
        target.write_text(target.read_text(encoding="utf-8").replace("# ", "# Neu ", 1), encoding="utf-8")
        real = cache._db

        class Locked:
            def __enter__(self) -> Locked:
                return self

            def __exit__(self, *exc: object) -> None:
                return None

            def executemany(self, *args: object) -> None:
                raise sqlite3.OperationalError("database is locked")

        read_vault(notes, cache=cache)
        cache._db = Locked()  # type: ignore[assignment]
        try:
            cache.save()  # the changed file's new row is not written; its older row stays in the table
        finally:
            cache._db = real
        assert read_vault(notes, cache=cache) == read_vault(notes)
    finally:
        cache.close()


def test_a_cache_of_the_previous_table_is_dropped_and_rebuilt(notes: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A table without the `slim` column (schema 1) is replaced, not written to or read."""
    import sqlite3

    path = notes / ".mindnet" / "notes.sqlite"
    path.parent.mkdir()
    db = sqlite3.connect(path)
    with db:
        db.execute("CREATE TABLE meta (key TEXT NOT NULL)")
        db.execute("INSERT INTO meta (key) VALUES ('[1, \"old\"]')")
        db.execute("CREATE TABLE notes (path TEXT PRIMARY KEY, mtime_ns INTEGER, ctime_ns INTEGER, size INTEGER,"
                   " ino INTEGER, note TEXT NOT NULL)")
        db.execute("INSERT INTO notes VALUES ('index.md', 0, 0, 0, 0, '{}')")
    db.close()
    cold = read_vault(notes)
    reads = Reads(monkeypatch)
    assert cached_read(notes) == cold
    assert len(reads.paths) == 17
    reads.paths.clear()
    assert cached_read(notes) == cold
    assert reads.paths == []


def test_a_resident_that_imports_reads_its_vault_without_decoding_rows(
    notes: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`Index.keep_notes_slim` (a watching server) keeps slim notes: once they are in memory, the read of the
    vault by an import of one saved file decodes no row, and the store holds every file as it is."""
    reading: list[bool] = []
    decoded: list[object] = []
    read, note = sync.read_vault, note_cache._note

    def read_vault_counted(*args: Any, **kwargs: Any) -> vault.VaultResult:
        reading.append(True)
        try:
            return read(*args, **kwargs)
        finally:
            reading.pop()

    monkeypatch.setattr(sync, "read_vault", read_vault_counted)
    monkeypatch.setattr(note_cache, "_note", lambda row: (decoded.append(row) if reading else None) or note(row))
    index = Index(notes, Settings(), embedder=FakeEmbedder(), shared=True)
    try:
        index.import_vault(e5=False)
        index.keep_notes_slim()
        with (notes / "concepts/rrf.md").open("a", encoding="utf-8") as fh:
            fh.write("\n\nEin neuer Absatz.\n")
        decoded.clear()
        index.import_vault(e5=False)  # decodes the other 16 rows once more, now into memory
        assert len(decoded) == 16
        with (notes / "concepts/rrf.md").open("a", encoding="utf-8") as fh:
            fh.write("\n\nNoch ein Absatz über [[Chunking]].\n")
        decoded.clear()
        assert index.import_vault(e5=False).notes_changed == 1
        assert decoded == []
        stored = {p.payload["path"]: p.payload["content_hash"]
                  for p in index.store().scroll("notes", fields=("path", "content_hash"))}
        assert stored == {n.path: n.content_hash for n in read_vault(notes).notes}
    finally:
        index.close()
