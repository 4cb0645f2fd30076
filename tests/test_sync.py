"""Incremental import (R21): idempotent, minimal re-embedding, deletes, forward links, locks, crashes.

These tests are about the importer, not the model, so most use the deterministic fake embedder
behind the real text-hash cache; the store is always the real embedded Qdrant Edge engine.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import qdrant_edge as qe
from hypothesis import given
from hypothesis import settings as hyp_settings
from hypothesis import strategies as st

from fakes import FakeEmbedder
from mindnet.api import Index, Vault
from mindnet.chunking.tokens import default_tokenizer
from mindnet.config import Settings
from mindnet.embedding import CachedEmbedder, Embedder, EmbeddingCache
from mindnet.errors import StoreError
from mindnet.points import note_windows
from mindnet.store import EdgeStore, Equals, Filter
from mindnet.store.records import point_id
from mindnet.sync import open_store

SAMPLE = Path(__file__).resolve().parents[1] / "examples" / "vault"


@pytest.fixture
def vault(tmp_path: Path) -> Path:
    root = tmp_path / "vault"
    shutil.copytree(SAMPLE, root, ignore=shutil.ignore_patterns(".mindnet"))
    return root


def run(vault: Path, quality: Embedder | None = None, settings: Settings | None = None, **kw: Any) -> Any:
    """One import as a fresh process would run it: its own `Index`, closed afterwards."""
    embedder = FakeEmbedder()
    with Index(vault, settings or Settings(), embedder=embedder, e5=quality) as index:
        return index.import_vault(e5=quality is not None, **kw), embedder


def clean_import(vault: Path) -> Path:
    """A copy of `vault` without its store, imported from scratch: what an incremental run must equal."""
    clean = vault.parent / "clean"
    shutil.copytree(vault, clean, ignore=shutil.ignore_patterns(".mindnet"))
    run(clean)
    return clean


def snapshot(vault: Path) -> dict[str, dict[str, str]]:
    """Every point id with a hash of its payload, per collection."""
    return {
        name: {pid: hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()
               for pid, payload in points.items()}
        for name, points in payloads(vault).items()
    }


def payloads(vault: Path) -> dict[str, dict[str, dict[str, Any]]]:
    """Every point id with its payload, per collection."""
    store = open_store(vault, Settings())
    try:
        store.ensure(store.meta())  # type: ignore[arg-type]
        return {name: {p.id: p.payload for p in store.scroll(name)} for name in ("notes", "chunks", "edges")}
    finally:
        store.close()


def differences(got: dict[str, dict[str, dict[str, Any]]], want: dict[str, dict[str, dict[str, Any]]]) -> list[str]:
    """One line per point missing, extra, or per payload field that differs: what a failed convergence
    test must say, since a hash mismatch names neither the note nor the field."""

    def shown(value: Any) -> str:
        text = json.dumps(value, sort_keys=True, ensure_ascii=False)
        return text if len(text) <= 300 else f"{text[:300]}… ({len(text)} chars)"

    lines: list[str] = []
    for name in sorted(set(got) | set(want)):
        have, expected = got.get(name, {}), want.get(name, {})
        for pid in sorted(set(have) | set(expected)):
            if pid not in have or pid not in expected:
                payload = expected.get(pid) or have.get(pid) or {}
                where = "missing" if pid not in have else "extra"
                lines.append(f"{name} {pid} ({payload.get('note_id')}): {where}")
                continue
            for key in sorted(set(have[pid]) | set(expected[pid])):
                a, b = have[pid].get(key, "<absent>"), expected[pid].get(key, "<absent>")
                if a != b:
                    lines.append(f"{name} {pid} ({have[pid].get('note_id')}) {key}: got {shown(a)}, want {shown(b)}")
    return lines


def test_second_import_embeds_nothing_and_writes_nothing(vault: Path) -> None:
    from mindnet.retrieval_text import _remembered

    first, model = run(vault)
    assert (first.notes_new, first.notes_failed) == (17, 0)
    assert first.chunks_embedded + first.windows_embedded == model.calls > first.chunks_embedded > 0
    assert _remembered.cache_info().currsize == 0  # the import forgot the texts it reduced
    second, model = run(vault)
    assert second.notes_unchanged == 17
    assert (second.notes_new, second.notes_changed, second.notes_deleted) == (0, 0, 0)
    assert second.chunks_embedded == second.points_written == model.calls == 0
    assert second.edges == first.edges > 0


def test_editing_one_paragraph_reembeds_only_changed_chunks(vault: Path) -> None:
    run(vault)
    path = vault / "projects" / "mindnet.md"
    note_before = {c.text_hash for c in Vault(vault).chunks()}
    text = path.read_text(encoding="utf-8")
    marker = "Es gibt drei Collections in Qdrant"
    assert text.count(marker) == 1
    path.write_text(text.replace(marker, "Es gibt genau drei Collections in Qdrant"), encoding="utf-8")
    after_chunks = list(Vault(vault).chunks())
    new_texts = {c.text_hash for c in after_chunks} - note_before
    summary, model = run(vault)
    assert summary.notes_changed == 1
    assert summary.notes_unchanged == 16
    assert 1 <= summary.chunks_embedded == len(new_texts)
    # Only the edited note's windows can change: the one holding the edit and those after it (token windows
    # shift), never another note's.
    edited = Vault(vault).note("projects/mindnet.md")
    assert edited is not None
    assert 1 <= summary.windows_embedded <= len(note_windows(edited, default_tokenizer()))
    assert model.calls == len(new_texts) + summary.windows_embedded
    project_chunks = [c for c in after_chunks if c.path == "projects/mindnet.md"]
    assert summary.chunks_reused == len(project_chunks) - len(new_texts)


def test_deleting_a_note_removes_its_points_and_unresolves_links(vault: Path) -> None:
    run(vault)
    target = vault / "concepts" / "rrf.md"
    saved = target.read_bytes()
    target.unlink()
    summary, _ = run(vault)
    assert summary.notes_deleted == 1
    assert summary.notes_relinked >= 1
    store = open_store(vault, Settings())
    try:
        store.ensure(store.meta())  # type: ignore[arg-type]
        assert store.count("chunks", Filter.all(Equals("note_id", "concept-rrf"))) == 0
        assert store.count("notes", Filter.all(Equals("note_id", "concept-rrf"))) == 0
        resolved = store.count("edges", Filter.all(Equals("target_id", "concept-rrf"), Equals("status", "resolved")))
        assert resolved == 0
        unresolved = store.count("edges", Filter.all(Equals("status", "unresolved"), Equals("kind", "references")))
        assert unresolved > 1
    finally:
        store.close()
    target.write_bytes(saved)
    back, _ = run(vault)
    assert back.notes_new == 1
    clean = clean_import(vault)
    assert snapshot(vault) == snapshot(clean)


def test_forward_reference_resolves_when_the_note_appears(vault: Path) -> None:
    run(vault)
    (vault / "Zettelkasten Methode.md").write_text("# Zettelkasten Methode\n\nLuhmanns Kartei.\n", encoding="utf-8")
    summary, _ = run(vault)
    assert summary.notes_new == 1
    assert summary.notes_relinked == 1
    store = open_store(vault, Settings())
    try:
        store.ensure(store.meta())  # type: ignore[arg-type]
        edges = list(store.scroll("edges", Filter.all(Equals("target_id", "zettelkasten-methode"))))
        assert edges and all(p.payload["status"] == "resolved" for p in edges)
        flt = Filter.all(Equals("kind", "backlink"), Equals("source_id", "zettelkasten-methode"))
        backlinks = list(store.scroll("edges", flt))
        assert [p.payload["target_id"] for p in backlinks] == ["20250901-2000-source-ahrens-smart-notes"]
    finally:
        store.close()


def test_forward_reference_resolves_through_an_alias_of_a_new_note(vault: Path) -> None:
    """The new note's id differs from the link text: only the edges' `link_keys` lead to the linker."""
    run(vault)
    note = "---\nid: neu-id\naliases: [Zettelkasten Methode]\n---\n# Kartei\n\nLuhmann.\n"
    (vault / "kartei.md").write_text(note, encoding="utf-8")
    summary, _ = run(vault)
    assert (summary.notes_new, summary.notes_relinked) == (1, 1)
    store = open_store(vault, Settings())
    try:
        store.ensure(store.meta())  # type: ignore[arg-type]
        assert not list(store.scroll("edges", Filter.all(Equals("target_id", "zettelkasten-methode"))))
        backlinks = store.scroll("edges", Filter.all(Equals("kind", "backlink"), Equals("source_id", "neu-id")))
        assert [p.payload["target_id"] for p in backlinks] == ["20250901-2000-source-ahrens-smart-notes"]
    finally:
        store.close()


def test_edges_written_before_link_keys_are_upgraded_once(vault: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from mindnet import graph, sync

    with monkeypatch.context() as old_version:  # a store written by the previous edge layout
        old_version.setattr(graph, "raw_link_keys", lambda raw: ())
        old_version.setattr(sync, "EDGE_LAYOUT", 1)
        run(vault)
    assert not any(snapshot_payloads(vault, "link_keys"))
    upgraded, model = run(vault)
    assert upgraded.notes_changed == 17 and model.calls == 0  # re-chunked, nothing re-embedded
    linked = snapshot_payloads(vault, "link_keys", only_with="raw_links")
    assert linked and all(linked)
    assert run(vault)[0].notes_unchanged == 17


def snapshot_payloads(vault: Path, field: str, only_with: str | None = None) -> list[Any]:
    """`field` of every edge (that has a non-empty `only_with`)."""
    store = open_store(vault, Settings())
    try:
        store.ensure(store.meta())  # type: ignore[arg-type]
        return [p.payload.get(field) for p in store.scroll("edges") if only_with is None or p.payload.get(only_with)]
    finally:
        store.close()


def test_second_concurrent_import_fails_fast_with_the_holder(vault: Path) -> None:
    run(vault)
    before = snapshot(vault)
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLDER.format(folder=str(vault / ".mindnet"))], stdout=subprocess.PIPE, text=True
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "locked"
        with pytest.raises(StoreError) as info:
            run(vault)
    finally:
        holder.kill()
        holder.wait()
    assert "another import is running" in str(info.value)
    assert f"pid {holder.pid}" in str(info.value)
    assert snapshot(vault) == before


HOLDER = """
import time
from pathlib import Path
from mindnet.sync import ImportLock
with ImportLock(Path({folder!r})):
    print("locked", flush=True)
    time.sleep(60)
"""


def test_dry_run_writes_nothing(vault: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from mindnet import file_stat

    monkeypatch.setattr(file_stat, "RACY_SECONDS", 0.0)  # the fresh copies would count as cacheable
    summary, model = run(vault, dry_run=True)
    assert summary.notes_new == 17 and summary.dry_run
    assert model.calls == 0
    assert not (vault / ".mindnet" / "qdrant").exists()  # not even empty collections (issue 13, finding 6)
    with sqlite3.connect(vault / ".mindnet" / "notes.sqlite") as db:  # nor the parsed-notes cache
        assert db.execute("SELECT count(*) FROM notes").fetchone() == (0,)
    run(vault)
    (vault / "new.md").write_text("# New\n\nA new note.\n", encoding="utf-8")
    before = snapshot(vault)
    again, _ = run(vault, dry_run=True)
    assert (again.notes_new, again.notes_unchanged) == (1, 17)
    assert snapshot(vault) == before
    rebuild, _ = run(vault, dry_run=True, full=True)
    assert (rebuild.notes_new, rebuild.notes_unchanged) == (18, 0)
    assert snapshot(vault) == before


DRIVER = """
import sys
sys.path.insert(0, {tests!r})
from fakes import FakeEmbedder
from mindnet.api import Index
from mindnet.config import Settings
import mindnet.sync
mindnet.sync._WRITE_BATCH = 4  # many batches, several with the encoder thread at any kill
mindnet.sync._spare_cores = lambda: 2.0  # the encoder on its own thread whatever the load
with Index({vault!r}, Settings(), embedder=FakeEmbedder()) as index:
    index.import_vault()
"""


@pytest.mark.slow
def test_sigkill_at_random_moments_converges_to_a_clean_import(vault: Path) -> None:
    """R21: kill -9 anywhere, and the next run repairs the store to exactly a clean import's state.

    Each round edits a few notes first, so every run has real work (chunks, edges, notes to write)
    and the kill lands inside it; the window adapts to how long an unkilled run took, so most of the
    20 rounds are really killed mid-run whatever the machine's speed.
    """
    clean = vault.parent / "clean"
    shutil.copytree(vault, clean)
    run(clean)
    expected = payloads(clean)
    notes = sorted(p for p in vault.rglob("*.md") if ".mindnet" not in p.parts)
    originals = {p: (p.read_bytes(), os.stat(p).st_mtime) for p in notes}
    script = DRIVER.format(tests=str(Path(__file__).parent), vault=str(vault))
    rng = random.Random(20261130)
    start = time.perf_counter()
    subprocess.run([sys.executable, "-c", script], check=True, capture_output=True)
    window = time.perf_counter() - start
    shutil.rmtree(vault / ".mindnet")
    killed = 0
    for _ in range(20):
        for note in rng.sample(notes, 4):
            note.write_bytes(note.read_bytes() + b"\nEdit.\n")
        began = time.perf_counter()
        proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        time.sleep(rng.uniform(0.0, window))
        if proc.poll() is None:
            proc.send_signal(signal.SIGKILL)
            killed += 1
        else:
            window = 0.8 * (time.perf_counter() - began)
        proc.wait()
    assert killed >= 10
    for note, (content, mtime) in originals.items():
        note.write_bytes(content)
        os.utime(note, (mtime, mtime))
    subprocess.run([sys.executable, "-c", script], check=True, capture_output=True)
    diff = differences(payloads(vault), expected)
    assert not diff, f"{len(diff)} differences after {killed} kills:\n" + "\n".join(diff)


KILLED_BEFORE_CLOSE = """
import os, signal, sys
sys.path.insert(0, {tests!r})
from fakes import FakeEmbedder
from mindnet.api import Index
from mindnet.config import Settings
from mindnet.store import EdgeStore
EdgeStore.close = lambda self: os.kill(os.getpid(), signal.SIGKILL)  # every write done, nothing flushed
with Index({vault!r}, Settings(), embedder=FakeEmbedder()) as index:
    index.import_vault()
"""


def test_note_edited_back_after_a_run_killed_before_the_store_closed_is_rewritten(vault: Path) -> None:
    """The random-kill test's rare failure, made certain: a run killed after its writes leaves them
    in Edge's WAL, and the next process replays it; a note whose file is back at its content of the
    last clean close must still be rewritten (R21), although the index remembers that old state."""
    run(vault)
    note = vault / "journal" / "2025-09-07.md"
    original = note.read_bytes()
    note.write_bytes(original + b"\nEdit.\n")
    script = KILLED_BEFORE_CLOSE.format(tests=str(Path(__file__).parent), vault=str(vault))
    killed = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    note.write_bytes(original)
    summary, _ = run(vault)
    assert summary.notes_changed == 1
    clean = clean_import(vault)
    diff = differences(payloads(vault), payloads(clean))
    assert not diff, "\n".join(diff)


def test_store_built_with_another_model_is_refused(vault: Path) -> None:
    run(vault)
    other = Index(vault, Settings(), embedder=FakeEmbedder(dim=16, model_id="other@2"))
    try:
        with pytest.raises(StoreError) as info:
            other.import_vault()
    finally:
        other.close()
    assert "fake@1" in str(info.value) and "other@2" in str(info.value)
    assert isinstance(open_store(vault, Settings()), EdgeStore)


def test_embedded_note_text_is_indexed_with_its_host(vault: Path) -> None:
    """`![[note]]`: the host chunk records the embed and is rewritten when the embedded note changes."""
    run(vault)
    source_id = "20250906-0740-thought-ueber-rueckverweise"
    store = open_store(vault, Settings())
    try:
        store.ensure(store.meta())  # type: ignore[arg-type]
        hosts = [
            p.payload["note_id"]
            for p in store.scroll("chunks", Filter.all(Equals("path", "journal/2025-09-03.md")))
            if source_id in p.payload["transcluded_from"]
        ]
    finally:
        store.close()
    assert len(hosts) == 1
    embedded = vault / "gedanken" / "Über Rückverweise.md"
    embedded.write_text(embedded.read_text(encoding="utf-8") + "\nNeuer Gedanke über Graphen.\n", encoding="utf-8")
    summary, _ = run(vault)
    assert summary.notes_changed == 1
    assert summary.notes_relinked == 1


def test_migrate_copies_every_point_with_vectors_to_a_server_store(vault: Path) -> None:
    """`mindnet migrate`: same ids, payloads and vectors on the qdrant-client side, nothing re-embedded."""
    from mindnet.store import ClientStore, copy_store

    run(vault)
    source = open_store(vault, Settings())
    target = ClientStore(":memory:")
    try:
        copied = copy_store(source, target)
        assert copied == {name: source.count(name) for name in ("notes", "chunks", "edges")}
        assert target.meta() == source.meta()
        for name in ("notes", "chunks", "edges"):
            a = {p.id: (p.payload, p.vectors) for p in source.scroll(name, with_vectors=True)}
            b = {p.id: (p.payload, p.vectors) for p in target.scroll(name, with_vectors=True)}
            assert a.keys() == b.keys()
            for key, (payload, vectors) in a.items():
                assert b[key][0] == payload
                for vec_name, vec in vectors.items():  # a note's windows are a multivector: one row each
                    # Stored in half floats (`store.embedded._datatype`), renormalised by the target on the way
                    # in: equal to half-float precision; every other vector exactly as it was.
                    tolerance = 1e-3 if vec_name == "note" else 1e-6
                    assert np.asarray(b[key][1][vec_name]) == pytest.approx(np.asarray(vec), abs=tolerance)
        query = next(iter(source.scroll("chunks", with_vectors=True))).vectors["use"]
        top_a = [p.id for p in source.search_dense("chunks", "use", query, limit=3)]
        top_b = [p.id for p in target.search_dense("chunks", "use", query, limit=3)]
        assert top_a[0] == top_b[0]
    finally:
        source.close()
        target.close()


class FailingAfter(FakeEmbedder):
    """A quality-tier stand-in that dies after `batches` calls, like a Ctrl-C mid-phase."""

    def __init__(self, batches: int) -> None:
        super().__init__(dim=16, model_id="fake-e5@1")
        self.left = batches

    def embed_passages(self, texts: Any) -> Any:
        if self.left == 0:
            raise KeyboardInterrupt
        self.left -= 1
        return super().embed_passages(texts)


def quality_vectors(vault: Path) -> tuple[int, int]:
    store = open_store(vault, Settings())
    try:
        store.ensure(store.meta())  # type: ignore[arg-type]
        points = list(store.scroll("chunks", with_vectors=True))
        return sum("e5" in p.vectors for p in points), len(points)
    finally:
        store.close()


def test_quality_tier_fills_in_after_the_import_and_resumes(vault: Path) -> None:
    """Issue 7: the store is searchable without the tier; a killed phase resumes with only what is missing."""
    first, _ = run(vault)
    assert first.chunks_embedded_e5 == 0
    assert quality_vectors(vault) == (0, first.chunks_written)
    with pytest.raises(KeyboardInterrupt):
        run(vault, quality=FailingAfter(batches=1))
    done, total = quality_vectors(vault)
    assert done == 32 and total == first.chunks_written
    tier = FakeEmbedder(dim=16, model_id="fake-e5@1")
    second, _ = run(vault, quality=tier)
    assert second.chunks_embedded_e5 == tier.calls == total - done
    assert quality_vectors(vault) == (total, total)
    third, _ = run(vault, quality=tier)
    assert third.chunks_embedded_e5 == 0 and tier.calls == total - done


def test_quality_vectors_return_from_the_cache_after_an_edit(vault: Path) -> None:
    folder = vault / ".mindnet"
    tier = CachedEmbedder(FakeEmbedder(dim=16, model_id="fake-e5@1"), EmbeddingCache(folder / "embeddings.sqlite"))
    try:
        run(vault, quality=tier)
        calls = tier.inner.calls
        path = vault / "projects" / "mindnet.md"
        text = path.read_text(encoding="utf-8")
        path.write_text(text.replace("Es gibt drei Collections in Qdrant", "Es gibt genau drei Collections in Qdrant"),
                        encoding="utf-8")
        summary, _ = run(vault, quality=tier)
    finally:
        tier.cache.close()
    assert summary.chunks_embedded_e5 == summary.chunks_embedded == tier.inner.calls - calls == 1
    done, total = quality_vectors(vault)
    assert done == total


def test_without_the_notes_cache_languages_come_from_the_store(vault: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A copied vault (no notes cache, new inodes) re-reads its files but neither re-detects nor rewrites."""
    from mindnet import vault as vault_module

    run(vault)
    (vault / ".mindnet" / "notes.sqlite").unlink()
    detected: list[str] = []
    original = vault_module.detect_language

    def counting(text: str, langs: tuple[str, ...]) -> str:
        detected.append(text)
        return original(text, langs)

    monkeypatch.setattr(vault_module, "detect_language", counting)
    summary, _ = run(vault)
    assert summary.notes_unchanged == 17
    assert detected == []


def test_swapped_contents_of_two_notes_are_both_changed(vault: Path) -> None:
    """Paths and hashes are the same sets as before; only the pairing tells the store is stale."""
    run(vault)
    a, b = vault / "concepts" / "rrf.md", vault / "concepts" / "qdrant.md"
    text_a, text_b = a.read_text(encoding="utf-8"), b.read_text(encoding="utf-8")
    a.write_text(text_b, encoding="utf-8")
    b.write_text(text_a, encoding="utf-8")
    summary, _ = run(vault)
    assert summary.notes_changed + summary.notes_new >= 2
    store = open_store(vault, Settings())
    try:
        store.ensure(store.meta())  # type: ignore[arg-type]
        paths = {p.payload["path"]: p.payload["fulltext"] for p in store.scroll("notes")}
    finally:
        store.close()
    assert paths["concepts/rrf.md"] in text_b and paths["concepts/qdrant.md"] in text_a


@pytest.mark.parametrize("max_filter", [20_000, 0])
def test_changed_and_deleted_notes_are_told_apart_by_their_state(
    vault: Path, monkeypatch: pytest.MonkeyPatch, max_filter: int
) -> None:
    """Both ways of finding stale notes: a `must_not` filter of the current states, or reading all states."""
    from mindnet import sync

    monkeypatch.setattr(sync, "_MAX_FILTER_VALUES", max_filter)
    run(vault)
    rrf = vault / "concepts" / "rrf.md"
    rrf.write_text(rrf.read_text(encoding="utf-8") + "\nNoch ein Satz.\n", encoding="utf-8")
    (vault / "concepts" / "qdrant.md").unlink()
    summary, _ = run(vault)
    assert (summary.notes_changed, summary.notes_deleted, summary.notes_new, summary.notes_unchanged) == (1, 1, 0, 15)


def test_a_no_op_import_reads_no_note_states_and_a_stored_note_without_one_is_still_redone(
    vault: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """When every stored `sync_state` is one of the vault's and their counts add up to the stored notes, nothing
    can be stale, and the import does not read the notes (`_stored_ids_except`: 0.9 s of a 30,000-note no-op);
    a note point that lacks its state (not counted by the facet) must still be found and rewritten."""
    from mindnet import sync

    run(vault)
    reads: list[object] = []
    scroll = EdgeStore.scroll

    def counted(self: EdgeStore, collection: str, flt: Any = None, **options: Any) -> Any:
        if collection == "notes" and (flt is None or flt.must_not):  # every note, or the stale ones by state
            reads.append(flt)
        return scroll(self, collection, flt, **options)

    monkeypatch.setattr(EdgeStore, "scroll", counted)
    summary, _ = run(vault)
    assert (summary.notes_new, summary.notes_changed, summary.notes_deleted) == (0, 0, 0)
    assert reads == []
    store = open_store(vault, Settings())
    try:
        store.ensure(store.meta())  # type: ignore[arg-type]
        counts = store.facet("notes", "sync_state")
        assert sync._stored_ids_except(store, set(counts), counts) == set()
        point = next(iter(store.scroll("notes", Filter.all(Equals("note_id", "concept-rrf")))))
        store._update("notes", qe.UpdateOperation.delete_payload([point_id(point.id)], ["sync_state"]))
        counts = store.facet("notes", "sync_state")
        assert sync._stored_ids_except(store, set(counts), counts) == {point.id}  # the counts no longer add up
        store.close()
        store = None
    finally:
        if store is not None:
            store.close()
    summary, _ = run(vault)
    assert (summary.notes_changed, summary.notes_new, summary.notes_deleted) == (1, 0, 0)
    assert reads  # the counts no longer add up: the states were read
    assert snapshot(vault) == snapshot(clean_import(vault))


def test_an_import_parses_and_scans_each_note_once(vault: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Blocks, links and tokens travel with the note (`ParsedNote`): chunking, edges and transclusion
    read them, so the Markdown parser and the link scanner see each imported note once."""
    from mindnet import links as links_module
    from mindnet import markdown as markdown_module
    from mindnet.chunking import pipeline as pipeline_module

    scanned: list[str] = []
    parsed: list[str] = []
    original_scan, original_parse = links_module.extract_links, markdown_module.parse_blocks

    def scan(text: str) -> list[Any]:
        scanned.append(text)
        return original_scan(text)

    def parse(body: str, engine: Any = "auto") -> list[Any]:
        parsed.append(body)
        return original_parse(body, engine)

    for module in (links_module, pipeline_module, sys.modules["mindnet.graph"], sys.modules["mindnet.points"]):
        if hasattr(module, "extract_links"):
            monkeypatch.setattr(module, "extract_links", scan)
    for module in (markdown_module, pipeline_module, sys.modules["mindnet.chunking.base"]):
        monkeypatch.setattr(module, "parse_blocks", parse)
    summary, _ = run(vault)
    from mindnet.vault import read_vault

    bodies = {note.fulltext for note in read_vault(vault, Settings()).notes}
    note_scans = [text for text in scanned if text in bodies]  # graph also scans single raw links
    assert summary.notes_new == len(bodies) == 17
    assert len(note_scans) == len(set(note_scans)) == 17
    assert len(parsed) == len(set(parsed)) == 17


def test_the_encoder_thread_writes_what_the_in_line_import_writes(
    vault: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 18: the encoder running ahead on its own thread changes when points are written, never which."""
    import mindnet.sync

    in_line = vault.parent / "in-line"
    shutil.copytree(vault, in_line)
    with Index(in_line, Settings(embed_ahead=0), embedder=FakeEmbedder()) as index:
        index.import_vault()
    monkeypatch.setattr(mindnet.sync, "_WRITE_BATCH", 3)  # many small batches, several in flight
    monkeypatch.setattr(mindnet.sync, "_spare_cores", lambda: 2.0)  # as on an idle machine
    stages: list[tuple[str, int, int]] = []
    with Index(vault, Settings(embed_ahead=3), embedder=FakeEmbedder()) as index:
        summary = index.import_vault(progress=lambda *args: stages.append(args))
    assert summary.encoder_ahead == 3
    assert snapshot(vault) == snapshot(in_line)
    assert summary.chunks_written == summary.chunks_embedded > 17
    embedded = [(done, total) for stage, done, total in stages if stage == "embed"]
    assert embedded[-1] == (17, 17) and [d for d, _ in embedded] == sorted(d for d, _ in embedded)


class _FailingEmbedder(FakeEmbedder):
    """Fails on its `fail_at`th call, as a model running out of memory on one batch would."""

    def __init__(self, fail_at: int) -> None:
        super().__init__()
        self.fail_at = fail_at
        self.batches = 0

    def embed_passages(self, texts: Any) -> Any:
        self.batches += 1
        if self.batches == self.fail_at:
            raise MemoryError("the model ran out of memory")
        return super().embed_passages(texts)


def test_an_encoder_error_on_its_thread_stops_the_import_and_the_next_repairs_it(
    vault: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import mindnet.sync

    clean = vault.parent / "clean"
    shutil.copytree(vault, clean)
    run(clean)
    monkeypatch.setattr(mindnet.sync, "_WRITE_BATCH", 3)
    monkeypatch.setattr(mindnet.sync, "_spare_cores", lambda: 2.0)
    failing = _FailingEmbedder(fail_at=4)
    with Index(vault, Settings(), embedder=failing) as index, pytest.raises(MemoryError):
        index.import_vault()
    assert failing.batches >= 4
    assert (vault / ".mindnet" / "journal.json").is_file()  # some batches were written: the journal stays
    summary, _ = run(vault)
    assert summary.notes_new + summary.notes_changed == 17
    assert snapshot(vault) == snapshot(clean)


class _Recorder:
    """An `embed` for `EmbedAhead` that knows which batches it has been given."""

    def __init__(self, fail_at: int | None = None) -> None:
        self.seen: list[int] = []
        self.fail_at = fail_at

    def __call__(self, texts: Any) -> Any:
        import numpy as np

        batch = int(texts[0])
        if batch == self.fail_at:
            raise ValueError(f"batch {batch}")
        self.seen.append(batch)
        return np.full((len(texts), 2), batch, dtype=np.float32)


@hyp_settings(max_examples=60, deadline=None)
@given(sizes=st.lists(st.integers(1, 5), max_size=12), ahead=st.integers(0, 4), fail=st.none() | st.integers(0, 12))
def test_embed_ahead_returns_every_batch_once_in_order_and_keeps_at_most_ahead_out(
    sizes: list[int], ahead: int, fail: int | None
) -> None:
    from mindnet.sync import EmbedAhead, _Batch

    embed = _Recorder(fail_at=fail if fail is not None and fail < len(sizes) else None)
    pipeline = EmbedAhead(embed, ahead)
    returned: list[int] = []
    try:
        for number, size in enumerate(sizes):
            for batch, vectors in pipeline.put(_Batch(texts=[str(number)] * size)):
                assert vectors.shape == (len(batch.texts), 2) and (vectors == int(batch.texts[0])).all()
                returned.append(int(batch.texts[0]))
            if embed.fail_at is None or number < embed.fail_at:
                assert number + 1 - len(returned) <= ahead  # memory stays bounded
        returned.extend(int(batch.texts[0]) for batch, _ in pipeline.drain())
    except ValueError as exc:
        assert embed.fail_at is not None and str(exc) == f"batch {embed.fail_at}"
        assert returned == list(range(embed.fail_at))  # everything before the bad batch came back
        return
    finally:
        pipeline.close()
    assert embed.fail_at is None
    assert returned == list(range(len(sizes))) == sorted(embed.seen)


def test_the_summary_names_the_encoder_threads_the_setting_fixed(vault: Path) -> None:
    from mindnet.cli_queries import summary_line as _summary_line

    with Index(vault, Settings(threads=1)) as index:  # the real model: its thread count is the point
        summary = index.import_vault()
    assert summary.chunks_embedded > 0 and summary.encoder_threads == 1
    assert " embedded on 1 thread, " in _summary_line(summary.as_dict())


@given(setting=st.integers(0, 8), spare=st.floats(-50, 64))
def test_the_encoder_runs_ahead_only_with_cores_to_spare(setting: int, spare: float) -> None:
    from mindnet.sync import OVERLAP_SPARE_CORES, embed_ahead

    ahead = embed_ahead(setting, spare)
    assert ahead == (setting if spare >= OVERLAP_SPARE_CORES else 0)
    assert embed_ahead(setting, 2.0) == setting and embed_ahead(setting, 0.5) == 0  # idle vs busy 2 cores


def test_the_overlap_is_decided_once_at_the_first_batch() -> None:
    from mindnet.sync import EmbedAhead, _Batch

    asked: list[float] = []

    def spare(cores: float) -> Callable[[], float]:
        def ask() -> float:
            asked.append(cores)
            return cores
        return ask

    for cores, expected in ((2.0, 2), (0.4, 0)):
        asked.clear()
        pipeline = EmbedAhead(_Recorder(fail_at=None), 2, spare(cores))
        assert not asked  # nothing measured while no batch exists (a no-op import asks nothing)
        try:
            done = [b for n in range(4) for b, _ in pipeline.put(_Batch(texts=[str(n)]))]
            done.extend(b for b, _ in pipeline.drain())
        finally:
            pipeline.close()
        assert asked == [cores] and pipeline.ahead == expected
        assert [int(b.texts[0]) for b in done] == [0, 1, 2, 3]


@given(ahead=st.integers(0, 3), before=st.sampled_from([0.0001, 0.005, 0.01]))
@hyp_settings(max_examples=12, deadline=None)
def test_an_overlapped_import_shortens_the_switch_interval_and_puts_it_back(ahead: int, before: float) -> None:
    import sys

    from mindnet.sync import OVERLAP_SWITCH_INTERVAL, EmbedAhead, _Batch

    previous = sys.getswitchinterval()
    sys.setswitchinterval(before)
    try:
        pipeline = EmbedAhead(_Recorder(fail_at=None), ahead)
        try:
            pipeline.put(_Batch(texts=["0"]))
            during = sys.getswitchinterval()
            list(pipeline.drain())
        finally:
            pipeline.close()
        pipeline.close()  # a second close (the writer's, then the importer's) changes nothing more
        after = sys.getswitchinterval()
    finally:
        sys.setswitchinterval(previous)
    # Python keeps the interval in whole microseconds (0.0001 reads back as 9.9e-05)
    assert during == pytest.approx(min(before, OVERLAP_SWITCH_INTERVAL) if ahead else before, abs=2e-6)
    assert after == pytest.approx(before, abs=2e-6)


def test_free_cores_take_the_interval_over_a_trailing_load_average(monkeypatch: pytest.MonkeyPatch) -> None:
    import mindnet.sync
    from mindnet.embedding import LoadAwareThreads

    meter = LoadAwareThreads()
    monkeypatch.setattr(mindnet.sync, "_spare_cores", lambda: 0.2)  # load 1.8 on 2 cores, a finished program's
    monkeypatch.setattr(meter, "recent_others", lambda: 0.1)
    assert mindnet.sync._free_cores(meter) == pytest.approx(meter.cpus - 0.1)
    monkeypatch.setattr(meter, "recent_others", lambda: None)  # no interval measured: the load average
    assert mindnet.sync._free_cores(meter) == 0.2
    monkeypatch.setattr(meter, "recent_others", lambda: float(meter.cpus))  # busy now, idle by the load average
    assert mindnet.sync._free_cores(meter) == 0.2


def _chunk_vectors(vault: Path) -> dict[str, tuple[list[float], Any]]:
    """Every chunk's stored dense and BM25 vectors."""
    store = open_store(vault, Settings())
    try:
        store.ensure(store.meta())  # type: ignore[arg-type]
        return {p.id: ([round(x, 5) for x in p.vectors["use"]], p.sparse.get("bm25"))
                for p in store.scroll("chunks", with_vectors=True)}
    finally:
        store.close()


@pytest.mark.parametrize("settings", [Settings(), Settings(lexical_shape="measured", dense_note_tokens=60.0)],
                         ids=["default", "measured-bm25+note-mix"])
def test_an_edit_leaves_every_stored_vector_as_a_clean_import_makes_it(tmp_path: Path, settings: Settings) -> None:
    """A chunk's vectors depend on its H2 section (issue 15): editing one chunk changes its siblings'
    vectors too, and the incremental import must write them, not keep the old ones; also with the
    opt-in representation (BM25's measured shape, the note mixed into short chunks)."""
    body = ("# Guide\n\n## Setup\n\n### Install\n\nInstall the compiler first.\n\n### Configure\n\n"
            "Configure the linker next.\n\n## Other\n\nUnrelated words here.\n")
    vault = tmp_path / "vault"
    vault.mkdir()
    (vault / "guide.md").write_text(body, encoding="utf-8")
    run(vault, settings=settings)
    before = _chunk_vectors(vault)
    (vault / "guide.md").write_text(body.replace("compiler first", "toolchain and the compiler first"), "utf-8")
    summary, _ = run(vault, settings=settings)
    assert summary.notes_changed == 1
    incremental = _chunk_vectors(vault)
    shutil.rmtree(vault / ".mindnet")
    run(vault, settings=settings)
    clean = _chunk_vectors(vault)
    assert incremental == clean
    sibling = next(cid for cid in clean if clean[cid][1] == before.get(cid, (None, None))[1]
                   and clean[cid][0] != before[cid][0])  # same own text and BM25, new section context
    assert sibling


class _PreparedEmbedder(FakeEmbedder):
    """Counts `prepare` calls: the importer starts the model on its own thread only when it will embed."""

    def __init__(self) -> None:
        super().__init__()
        self.prepared = 0

    def prepare(self) -> None:
        self.prepared += 1


def test_the_model_is_started_for_a_cold_import_and_not_for_a_no_op(vault: Path) -> None:
    """Issue 18: a cold import starts the model beside the vault read; a no-op import loads no model."""
    embedder = _PreparedEmbedder()
    with Index(vault, Settings(), embedder=embedder) as index:
        index.import_vault()
    assert embedder.prepared == 1
    again = _PreparedEmbedder()
    with Index(vault, Settings(), embedder=again) as index:
        summary = index.import_vault()
    assert summary.chunks_written == 0 and again.prepared == 0 and again.calls == 0


class _FailingStart(FakeEmbedder):
    """A model whose start-up fails: the import must report it from the embedding, as before."""

    def prepare(self) -> None:
        raise MemoryError("no memory for the model")


def test_a_failing_model_start_only_costs_the_start(vault: Path) -> None:
    """The start-up's own error is not the import's: the first embedding runs (and would report) as always."""
    with Index(vault, Settings(), embedder=_FailingStart()) as index:
        summary = index.import_vault()
    assert summary.chunks_written == summary.chunks_embedded > 0


@pytest.mark.parametrize("ahead", [0, 2])
def test_a_fresh_store_is_made_once_the_encoder_has_work_and_before_the_first_write(
    vault: Path, monkeypatch: pytest.MonkeyPatch, ahead: int
) -> None:
    """Issue 18: a fresh store's collections and indexes are made after the first batch went to the
    encoder (with it ahead, while it works) and before any point is written; the store is complete."""
    import mindnet.sync

    events: list[str] = []

    def spy(cls: Any, name: str) -> None:
        original = getattr(cls, name)

        def logged(self: Any, *args: Any, **kwargs: Any) -> Any:
            events.append(name)
            return original(self, *args, **kwargs)

        monkeypatch.setattr(cls, name, logged)

    spy(mindnet.sync.EmbedAhead, "submit")
    spy(EdgeStore, "ensure")
    spy(EdgeStore, "upsert")
    spy(EdgeStore, "delete")
    monkeypatch.setattr(mindnet.sync, "_WRITE_BATCH", 3)
    monkeypatch.setattr(mindnet.sync, "_spare_cores", lambda: 2.0)
    with Index(vault, Settings(embed_ahead=ahead), embedder=FakeEmbedder()) as index:
        summary = index.import_vault()
    assert events.count("ensure") == 1
    first_write = min(events.index(w) for w in ("upsert", "delete") if w in events)
    assert events.index("ensure") < first_write
    # Batches went to the encoder while the vault was read, before the store was made.
    assert events[: events.index("ensure")].count("submit") >= 2
    assert summary.chunks_written > 0 and payloads(vault)["chunks"]
    assert snapshot(vault) == snapshot_of_fresh_in_line(vault)


def snapshot_of_fresh_in_line(vault: Path) -> dict[str, dict[str, str]]:
    """The store a plain in-line import of a copy of `vault` makes."""
    copy = vault.parent / f"{vault.name}-in-line"
    shutil.copytree(vault, copy, ignore=shutil.ignore_patterns(".mindnet"))
    with Index(copy, Settings(embed_ahead=0), embedder=FakeEmbedder()) as index:
        index.import_vault()
    return snapshot(copy)


def test_an_empty_vault_still_leaves_a_store(tmp_path: Path) -> None:
    """A fresh store is made lazily, but an import of a vault with no notes still records it."""
    empty = tmp_path / "empty"
    empty.mkdir()
    with Index(empty, Settings(), embedder=FakeEmbedder()) as index:
        summary = index.import_vault()
        assert summary.notes_new == 0
        assert index.store().meta() is not None


class _NotWhileReading:
    """Stands in for `sync._EmbedWhileReading`: nothing is chunked or embedded during the read."""

    def __init__(self, *args: Any) -> None:
        self.batches: list[Any] = []

    def __call__(self, note: Any) -> None:
        return None

    def read_all(self) -> None:
        return None

    def note(self, path: str) -> None:
        return None

    def parsed(self, note: Any) -> None:
        return None

    def take_chunks(self, note: Any) -> None:
        return None


def _tricky_vault(root: Path) -> Path:
    """The sample vault plus what makes ids or model inputs change after the read: a clashing
    explicit id, colliding default ids, note and image embeds, and a file that fails to read."""
    shutil.copytree(SAMPLE, root, ignore=shutil.ignore_patterns(".mindnet"))
    for folder in ("a", "b"):
        (root / folder).mkdir()
        (root / folder / "index.md").write_text(f"# Index {folder}\n\nThe {folder} folder's own index note.\n", "utf-8")
    (root / "twin-one.md").write_text("---\nid: twin\n---\n# One\n\nThe first twin keeps the id.\n", "utf-8")
    (root / "twin-two.md").write_text("---\nid: twin\n---\n# Two\n\nThe second twin is skipped.\n", "utf-8")
    (root / "host.md").write_text("# Host\n\nBefore the embed.\n\n![[a/index]]\n\nAfter it. ![](pic.png)\n", "utf-8")
    (root / "broken.md").write_bytes(b"---\nid: [unclosed\n---\nbody\n")
    return root


@pytest.mark.parametrize("ahead", [0, 2])
def test_embedding_while_the_vault_is_read_makes_the_store_a_plain_import_makes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, ahead: int
) -> None:
    """Issue 18: a fresh store's notes go to the encoder as they are read; the store, vectors included,
    equals that of an import that chunks only after the whole vault is read, and nothing is embedded twice."""
    import mindnet.sync

    monkeypatch.setattr(mindnet.sync, "_WRITE_BATCH", 3)  # batches across notes, the clashing ones among them
    monkeypatch.setattr(mindnet.sync, "_spare_cores", lambda: 2.0)
    early = _tricky_vault(tmp_path / "early")
    plain = tmp_path / "plain"
    shutil.copytree(early, plain)  # file times kept: they are in the payloads
    embedder = FakeEmbedder()
    with Index(early, Settings(embed_ahead=ahead), embedder=embedder) as index:
        summary = index.import_vault()
    with monkeypatch.context() as patch:
        patch.setattr(mindnet.sync, "_EmbedWhileReading", _NotWhileReading)
        with Index(plain, Settings(embed_ahead=ahead), embedder=FakeEmbedder()) as index:
            reference = index.import_vault()
    assert differences(payloads(early), payloads(plain)) == []
    assert _chunk_vectors(early) == _chunk_vectors(plain)
    assert summary.notes_failed == reference.notes_failed >= 2  # the broken file and the second twin
    assert summary.chunks_written == reference.chunks_written == reference.chunks_embedded
    # The model saw each text once (a batch dropped after the read finds its texts in the cache),
    # and the skipped twin's one chunk is the only text embedded and not stored.
    assert embedder.calls == summary.chunks_embedded + summary.windows_embedded
    assert summary.chunks_embedded == reference.chunks_embedded + 1
    assert 0 <= summary.windows_embedded - reference.windows_embedded <= 1 < reference.windows_embedded  # its window
    # A dropped batch's cache hits are no reuse: a fresh store reuses nothing (it said "260 reused" for
    # 606 chunks of foam-docs, whose two index.md notes clash).
    assert summary.chunks_reused == reference.chunks_reused == 0


def test_a_note_whose_user_pattern_runs_away_is_skipped_and_the_others_import(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Non-negotiable 3 with the recursive strategy: one note on which a user's separator backtracks
    catastrophically is one problem line naming it once; the import goes on with every other note,
    keeps the bad note's stored chunks from before, and tries it again next time (exit code 1)."""
    import functools

    from mindnet.chunking import pipeline
    from mindnet.config import RecursiveSettings

    monkeypatch.setattr(pipeline, "chunk_recursive", functools.partial(pipeline.chunk_recursive, time_limit=0.5))
    root = tmp_path / "vault"
    root.mkdir()
    (root / "evil.md").write_text("# Evil\n\nfirst words here.\n", encoding="utf-8")
    (root / "ok.md").write_text("# Ok\n\nfine note about compost.\n", encoding="utf-8")
    settings = Settings(strategy="recursive",
                        recursive=RecursiveSettings(max_chunk_size=10, separator_group=None,
                                                    separators=(r"\n\n", r"(a+)+$")))
    first, _ = run(root, settings=settings)
    assert (first.notes_new, first.notes_failed) == (2, 0)
    (root / "evil.md").write_text(" ".join(["wort"] * 20) + "\n" + "a" * 3000 + "b\n", encoding="utf-8")
    (root / "ok.md").write_text("# Ok\n\nfine note about compost heaps.\n", encoding="utf-8")
    second, _ = run(root, settings=settings)
    assert (second.notes_changed, second.notes_failed) == (1, 1)
    assert len(second.problems) == 1 and second.problems[0].startswith("evil.md: error: separator [(a+)+$]")
    assert second.problems[0].count("evil.md") == 1
    store = open_store(root, settings)
    try:
        texts = {p.payload["note_id"]: p.payload["text"] for p in store.scroll("chunks")}
    finally:
        store.close()
    assert "first words here." in texts["evil"]  # the chunks from before the bad edit
    assert "compost heaps" in texts["ok"]
    third, _ = run(root, settings=settings)
    assert third.notes_failed == 1  # tried again, not marked as done


def test_progress_counts_every_stage_from_reading_to_the_note_points(vault: Path) -> None:
    """Issue 27: the read is a stage with counts too, and each stage counts towards one total."""
    calls: list[tuple[str, int, int]] = []
    with Index(vault, Settings(import_batch_notes=5), embedder=FakeEmbedder()) as index:
        index.import_vault(progress=lambda stage, done, total: calls.append((stage, done, total)))
    stages = list(dict.fromkeys(stage for stage, _, _ in calls))
    assert stages[0] == "read" and {"chunk", "embed", "link", "notes", "optimize"} <= set(stages)
    for stage in stages:
        mine = [(done, total) for s, done, total in calls if s == stage]
        assert len({total for _, total in mine}) == 1, (stage, mine)
        assert mine[-1][0] == mine[-1][1], (stage, mine)
        assert [done for done, _ in mine] == sorted(done for done, _ in mine)
    assert next(t for s, _, t in calls if s == "read") == 17


def test_the_window_cap_is_in_the_chunking_hash() -> None:
    """A store written with other `note_windows` holds other note-level vectors: the import rewrites its notes once
    (from the embedding cache); with note-level vectors off the cap changes nothing."""
    import dataclasses

    from mindnet.config import Settings
    from mindnet.sync import chunking_hash

    base = Settings()
    assert chunking_hash(dataclasses.replace(base, note_windows=8)) != chunking_hash(base)
    off = dataclasses.replace(base, note_vectors=False)
    assert chunking_hash(dataclasses.replace(off, note_windows=8)) == chunking_hash(off)
