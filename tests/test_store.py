"""One suite, run against every adapter: Edge under tmp_path, qdrant-client `:memory:`, and a real
server when MINDNET_TEST_QDRANT_URL is set (R16, R17, R20, R22)."""

from __future__ import annotations

import os
import platform
import signal
import subprocess
import sys
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mindnet.errors import StoreError
from mindnet.store import (
    AnyOf,
    ClientStore,
    EdgeStore,
    Equals,
    Filter,
    HasVector,
    PointRecord,
    Prefix,
    Range,
    Store,
    StoreSchema,
    TextMatch,
    VectorSpec,
    lexical_document,
    lexical_query,
    open_store,
    point_id,
)

USE = VectorSpec("use", "fake-use@1", 4)
E5 = VectorSpec("e5", "fake-e5@1", 3)
SCHEMA = StoreSchema(vectors=(USE,), chunking_hash="c1")

_ADAPTERS = ["edge", "memory", "server"]
SERVER_URL = os.environ.get("MINDNET_TEST_QDRANT_URL")
NO_SERVER = "set MINDNET_TEST_QDRANT_URL to a Qdrant server (see docs/development.md) to run the server contract"

StoreFactory = Callable[[], Store]


@pytest.fixture(params=_ADAPTERS)
def open_test_store(request: pytest.FixtureRequest, tmp_path) -> Iterator[StoreFactory]:
    """A factory: Edge reopens the same folder; `:memory:` hands back the one live instance
    (its data dies with the client); a server run uses a fresh collection prefix."""
    if request.param == "server" and not SERVER_URL:
        pytest.skip(NO_SERVER)
    opened: list[Store] = []
    prefix = f"t{uuid.uuid4().hex[:10]}"
    memory: list[ClientStore] = []

    def factory() -> Store:
        if request.param == "edge":
            store: Store = EdgeStore(tmp_path / "store", prefix=prefix)
        elif request.param == "memory":
            if not memory:
                memory.append(ClientStore(":memory:", prefix=prefix))
            store = memory[0]
        else:
            store = ClientStore(os.environ["MINDNET_TEST_QDRANT_URL"], prefix=prefix,
                                api_key=os.environ.get("MINDNET_TEST_QDRANT_API_KEY"))
        opened.append(store)
        return store

    factory.kind = request.param  # type: ignore[attr-defined]
    yield factory
    if request.param == "server" and opened:
        cleanup = opened[-1]
        for name in ("notes", "chunks", "edges"):
            if cleanup._exists(name):
                cleanup._drop(name)
        cleanup._drop_meta()
    for store in opened:
        store.close()


def _unit(*xs: float) -> list[float]:
    v = np.array(xs, dtype=np.float32)
    return (v / np.linalg.norm(v)).tolist()


def _chunk(i: int, *, note: str, tags: list[str], text: str, lang: str = "de", vec: list[float] | None = None,
           e5: list[float] | None = None) -> PointRecord:
    vectors = {"use": vec or _unit(1.0, i, 0.0, 0.5)}
    if e5 is not None:
        vectors["e5"] = e5
    return PointRecord(
        id=f"{note}#c{i:02d}",
        payload={"note_id": note, "tags": tags, "text": text, "lang": lang, "path": f"area/{note}.md",
                 "type": "concept" if i % 2 else "thought", "priority": i, "created": f"2024-0{1 + i % 9}-01"},
        vectors=vectors,
        sparse={"bm25": lexical_document(text, lang)},
    )


CHUNKS = [
    _chunk(1, note="haus", tags=["bau", "wohnen"], text="Die Häuser am Fluss sind alt und stehen leer.",
           vec=_unit(1, 0, 0, 0)),
    _chunk(2, note="haus", tags=["bau"], text="Ein Dach schützt vor Regen und Schnee.", vec=_unit(0.9, 0.1, 0, 0)),
    _chunk(3, note="garden", tags=["garten"], text="Gardening in spring: the roses are blooming.",
           lang="en", vec=_unit(0, 1, 0, 0)),
    _chunk(4, note="garden", tags=["garten", "wohnen"], text="Im Garten wachsen Tomaten und Bohnen.",
           vec=_unit(0, 0.9, 0.1, 0)),
    _chunk(5, note="code", tags=[], text="Python code: def main() returns the exit code.", lang="en",
           vec=_unit(0, 0, 1, 0)),
]


def _ids(hits) -> list[str]:
    return [h.id for h in hits]


def test_ensure_is_idempotent_and_records_schema(open_test_store: StoreFactory) -> None:
    store = open_test_store()
    assert store.meta() is None
    store.ensure(SCHEMA)
    store.ensure(SCHEMA)
    assert store.meta() == SCHEMA
    for name in ("notes", "chunks", "edges"):
        assert store.count(name) == 0
    store.upsert("chunks", CHUNKS)
    store.ensure(SCHEMA)
    assert store.count("chunks") == len(CHUNKS)


def test_upsert_retrieve_scroll_count_delete(open_test_store: StoreFactory) -> None:
    store = open_test_store()
    store.ensure(SCHEMA)
    assert store.upsert("chunks", CHUNKS) == 5
    assert store.upsert("chunks", CHUNKS[:2]) == 2  # same ids replace, never duplicate
    assert store.count("chunks") == 5

    got = store.retrieve("chunks", ["garden#c03", "missing#c01", "haus#c01"], with_vectors=True)
    assert _ids(got) == ["garden#c03", "haus#c01"]
    assert got[0].payload["chunk_id"] == "garden#c03"  # the string id stays in the payload (R12)
    assert got[0].payload["tags"] == ["garten"]
    assert np.allclose(got[0].vectors["use"], _unit(0, 1, 0, 0), atol=1e-6)
    assert got[0].sparse["bm25"].indices

    assert sorted(p.id for p in store.scroll("chunks", page_size=2)) == sorted(c.id for c in CHUNKS)
    assert {p.id for p in store.scroll("chunks", Filter.all(Equals("note_id", "haus")))} == {"haus#c01", "haus#c02"}
    assert store.count("chunks", Filter.all(Equals("tags", "garten"))) == 2

    store.delete("chunks", Filter.all(Equals("note_id", "haus")))
    assert store.count("chunks") == 3
    store.delete_ids("chunks", ["garden#c03", "never#c01"])
    assert sorted(p.id for p in store.scroll("chunks")) == ["code#c05", "garden#c04"]
    with pytest.raises(StoreError, match="empty filter"):
        store.delete("chunks", Filter())


def test_notes_and_edges_collections_without_dense_vectors(open_test_store: StoreFactory) -> None:
    store = open_test_store()
    store.ensure(SCHEMA)
    store.upsert("notes", [PointRecord("haus", {"title": "Haus", "tags": ["bau"]})])
    edge_id = "references:haus#c01->garden"
    store.upsert("edges", [PointRecord(edge_id, {"kind": "references", "scope": "chunk", "source_id": "haus#c01",
                                                  "target_id": "garden", "note_id": "haus", "status": "resolved"})])
    assert store.retrieve("notes", ["haus"])[0].payload["note_id"] == "haus"
    assert [e.id for e in store.scroll("edges", Filter.all(Equals("target_id", "garden")))] == [edge_id]
    with pytest.raises(StoreError, match="no dense vector"):
        store.upsert("notes", [PointRecord("x", {}, vectors={"use": [1.0, 0, 0, 0]})])


def test_dense_search_with_filters(open_test_store: StoreFactory) -> None:
    store = open_test_store()
    store.ensure(SCHEMA)
    store.upsert("chunks", CHUNKS)
    q = _unit(1, 0.05, 0, 0)
    assert _ids(store.search_dense("chunks", "use", q, limit=2)) == ["haus#c01", "haus#c02"]
    hits = store.search_dense("chunks", "use", q, limit=5, flt=Filter.all(Equals("tags", "garten")))
    assert _ids(hits) == ["garden#c03", "garden#c04"]
    assert hits[0].score > hits[1].score
    assert hits[0].payload["note_id"] == "garden"
    cases = {
        Filter.all(AnyOf("tags", ("wohnen", "nothing"))): {"haus#c01", "garden#c04"},
        Filter.all(Prefix("path", "area/ga")): {"garden#c03", "garden#c04"},
        Filter.all(Range("priority", gte=2, lt=4)): {"haus#c02", "garden#c03"},
        Filter.all(Range("created", gt="2024-04-01T00:00:00Z")): {"garden#c04", "code#c05"},
        Filter.all(TextMatch("text", "Tomaten")): {"garden#c04"},
        Filter.all(Equals("lang", "en")): {"garden#c03", "code#c05"},
        Filter(must_not=(Equals("note_id", "haus"),)): {"garden#c03", "garden#c04", "code#c05"},
        Filter(should=(Equals("note_id", "code"), Equals("tags", "bau"))): {"haus#c01", "haus#c02", "code#c05"},
        Filter.all(Equals("lang", "de"), Filter(should=(Equals("tags", "garten"),))): {"garden#c04"},
    }
    for flt, expected in cases.items():
        assert set(_ids(store.search_dense("chunks", "use", q, limit=10, flt=flt))) == expected, flt
        assert store.count("chunks", flt) == len(expected), flt


def test_sparse_search_is_language_aware(open_test_store: StoreFactory) -> None:
    store = open_test_store()
    store.ensure(SCHEMA)
    store.upsert("chunks", CHUNKS)
    # German stemming: "Haus" finds "Häuser"; the query carries both languages' stems.
    assert _ids(store.search_sparse("chunks", lexical_query("Haus"), limit=3)) == ["haus#c01"]
    assert _ids(store.search_sparse("chunks", lexical_query("blooming roses", ["en"]), limit=3)) == ["garden#c03"]
    hits = store.search_sparse("chunks", lexical_query("Garten code"), limit=5, flt=Filter.all(Equals("lang", "en")))
    assert _ids(hits) == ["code#c05"]
    assert store.search_sparse("chunks", lexical_query("der die das"), limit=3) == []  # stopwords only


def test_equal_scores_rank_in_id_order(open_test_store: StoreFactory) -> None:
    """Ties come back in id order whatever order the points were written in (the engine's own order
    follows its internal ids, which depend on how segments were written)."""
    store = open_test_store()
    store.ensure(SCHEMA)
    same = _unit(1, 0, 0, 0)
    for cid in ("z#c02", "a#c01", "m#c03"):  # written out of order, one call each
        store.upsert("chunks", [PointRecord(cid, {"note_id": cid.split("#")[0]}, vectors={"use": same})])
    assert _ids(store.search_dense("chunks", "use", same, limit=3)) == ["a#c01", "m#c03", "z#c02"]


def test_hybrid_rrf_fuses_both_rankings(open_test_store: StoreFactory) -> None:
    store = open_test_store()
    store.ensure(SCHEMA)
    store.upsert("chunks", CHUNKS)
    # Dense prefers the house chunks, lexical only knows the garden chunk; RRF ranks a document
    # found by both above one found by a single branch.
    dense_q = _unit(0.2, 1, 0, 0)
    hits = store.search_hybrid("chunks", "use", dense_q, lexical_query("Tomaten"), limit=3)
    assert hits[0].id == "garden#c04"
    assert hits[0].score > hits[1].score
    hits = store.search_hybrid("chunks", "use", dense_q, lexical_query("Tomaten"), limit=5,
                               flt=Filter.all(Equals("note_id", "haus")))
    assert set(_ids(hits)) == {"haus#c01", "haus#c02"}
    # No lexical terms: plain dense ranking.
    assert _ids(store.search_hybrid("chunks", "use", dense_q, lexical_query("und"), limit=1)) == ["garden#c03"]


def test_model_or_dimension_mismatch_is_a_clear_error(open_test_store: StoreFactory) -> None:
    store = open_test_store()
    store.ensure(SCHEMA)
    store.upsert("chunks", CHUNKS)
    with pytest.raises(StoreError, match=r"model fake-use@1 \(store\) vs other@2.*--full"):
        store.ensure(StoreSchema(vectors=(VectorSpec("use", "other@2", 4),), chunking_hash="c1"))
    with pytest.raises(StoreError, match=r"dimension 4 \(store\) vs 8"):
        store.ensure(StoreSchema(vectors=(VectorSpec("use", "fake-use@1", 8),), chunking_hash="c1"))
    with pytest.raises(StoreError, match="chunking config c1"):
        store.ensure(StoreSchema(vectors=(USE,), chunking_hash="c2"))
    store.ensure(SCHEMA)
    with pytest.raises(StoreError, match="has 3 dimensions"):
        store.upsert("chunks", [PointRecord("x#c01", {}, vectors={"use": [1.0, 0.0, 0.0]})])
    with pytest.raises(StoreError, match="query vector"):
        store.search_dense("chunks", "use", [1.0, 0.0])
    other = StoreSchema(vectors=(VectorSpec("use", "other@2", 8),), chunking_hash="c2")
    store.reset(other)  # the --full path
    assert store.meta() == other
    assert store.count("chunks") == 0


def test_named_vector_added_later_only_sees_points_that_have_it(open_test_store: StoreFactory) -> None:
    store = open_test_store()
    store.ensure(SCHEMA)
    store.upsert("chunks", CHUNKS)
    both = StoreSchema(vectors=(USE, E5), chunking_hash="c1")
    store.ensure(both)  # adds `e5` in place, keeps the data
    assert set(store.meta().vectors) == {USE, E5}
    assert store.count("chunks") == 5
    store.upsert("chunks", [
        _chunk(1, note="haus", tags=["bau"], text="Häuser", vec=_unit(1, 0, 0, 0), e5=_unit(1, 0, 0)),
        _chunk(3, note="garden", tags=["garten"], text="roses", lang="en", vec=_unit(0, 1, 0, 0), e5=_unit(0, 1, 0)),
    ])
    hits = store.search_dense("chunks", "e5", _unit(1, 0.1, 0), limit=10)
    assert _ids(hits) == ["haus#c01", "garden#c03"]
    assert len(store.search_dense("chunks", "use", _unit(1, 0, 0, 0), limit=10)) == 5
    # A run that only knows `use` keeps e5's record rather than erasing it.
    store.ensure(SCHEMA)
    assert set(store.meta().vectors) == {USE, E5}


def test_a_reserved_vector_is_made_with_the_collection_and_recorded_once_written(
        open_test_store: StoreFactory) -> None:
    store = open_test_store()
    store.ensure(StoreSchema(vectors=(USE,), chunking_hash="c1", reserved=((E5.name, E5.dim),)))
    store.upsert("chunks", CHUNKS)
    assert set(store.meta().vectors) == {USE}  # reserved, not recorded: no run has written it
    if isinstance(store, EdgeStore):
        import json

        config = json.loads(next(store.path.rglob("*_chunks/edge_config.json")).read_text(encoding="utf-8"))
        assert config["vectors"]["e5"]["memory"] == "cold"  # placed as the others (added later, it is not)
    store.ensure(StoreSchema(vectors=(USE, E5), chunking_hash="c1"))  # the tier's run
    assert set(store.meta().vectors) == {USE, E5}
    store.upsert("chunks", [_chunk(2, note="haus", tags=["bau"], text="Dach", vec=_unit(0.9, 0.1, 0, 0),
                                   e5=_unit(0, 0, 1))])
    assert _ids(store.search_dense("chunks", "e5", _unit(0, 0.1, 1), limit=10)) == ["haus#c02"]


def test_a_reservation_of_another_size_is_made_anew_when_a_run_writes_the_vector(tmp_path) -> None:
    """The tier's model may not be the one the import reserved for (a test's, another e5): the unwritten
    reservation gives way to the size the run writes, and what was stored stays."""
    with EdgeStore(tmp_path / "store", prefix="v") as store:
        store.ensure(StoreSchema(vectors=(USE,), chunking_hash="c1", reserved=((E5.name, 7),)))
        store.upsert("chunks", CHUNKS)
        store.ensure(StoreSchema(vectors=(USE, E5), chunking_hash="c1"))
        store.upsert("chunks", [_chunk(2, note="haus", tags=["bau"], text="Dach", vec=_unit(0.9, 0.1, 0, 0),
                                       e5=_unit(0, 0, 1))])
        assert _ids(store.search_dense("chunks", "e5", _unit(0, 0.1, 1), limit=10)) == ["haus#c02"]
        assert store.count("chunks") == 5


def test_new_store_refuses_reads_before_ensure(open_test_store: StoreFactory) -> None:
    store = open_test_store()
    with pytest.raises(StoreError, match="mindnet import"):
        store.count("chunks")
    store.ensure(SCHEMA)
    with pytest.raises(StoreError, match="unknown collection"):
        store.count("nodes")  # type: ignore[arg-type]


def test_edge_reopen_keeps_data_and_locks(tmp_path) -> None:
    path = tmp_path / "store"
    with EdgeStore(path, prefix="v") as store:
        store.ensure(SCHEMA)
        store.upsert("chunks", CHUNKS)
        with pytest.raises(StoreError, match="in use"):
            EdgeStore(path, prefix="v").ensure(SCHEMA)
        store.optimize()
    assert sorted(p.name for p in path.iterdir()) == ["v.meta.json", "v_chunks", "v_edges", "v_notes"]
    with EdgeStore(path, prefix="v") as store:
        assert store.meta() == SCHEMA
        assert store.count("chunks") == 5  # a reader needs no ensure()
        store.ensure(SCHEMA)
        assert store.count("chunks") == 5
        assert _ids(store.search_dense("chunks", "use", _unit(0, 0, 1, 0), limit=1)) == ["code#c05"]
        with pytest.raises(StoreError, match="--full"):
            store.ensure(StoreSchema(vectors=(VectorSpec("use", "other@2", 4),), chunking_hash="c1"))


def test_a_reader_leaves_its_shards_to_the_exit_and_a_writer_closes_them(tmp_path,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    from mindnet.store import embedded

    left: dict[str, object] = {}
    monkeypatch.setattr(embedded, "_LEFT_FOR_EXIT", left)
    path = tmp_path / "store"
    with EdgeStore(path, prefix="v", leave_to_exit=True) as store:  # a writer: closed as always
        store.ensure(SCHEMA)
        store.upsert("chunks", CHUNKS)
    assert left == {}
    with EdgeStore(path, prefix="v", leave_to_exit=True) as store:  # a reader: its shard is left open, lock and all
        assert store.count("chunks") == 5
    assert list(left) == [str(path / "v_chunks")]
    with pytest.raises(Exception, match="WouldBlock"):  # still open: another opener finds its WAL locked
        embedded.qe.EdgeShard.load(str(path / "v_chunks"))
    with EdgeStore(path, prefix="v", leave_to_exit=True) as store:  # taken back; its write closes it
        assert store.count("chunks") == 5
        assert left == {}
        store.delete_ids("chunks", [CHUNKS[0].id])
    assert left == {}
    with EdgeStore(path, prefix="v") as store:  # a reader of a process that does not end by exit: closed
        assert store.count("chunks") == 4
    assert left == {}


class _RecordingShard:
    """An Edge shard that notes every update and its closing, and passes them on."""

    def __init__(self, shard: object, calls: list[object]) -> None:
        self._shard = shard
        self.calls = calls

    def update(self, operation: object) -> None:
        self.calls.append(operation)
        self._shard.update(operation)  # type: ignore[attr-defined]

    def close(self) -> None:
        self.calls.append("close")
        self._shard.close()  # type: ignore[attr-defined]

    def optimize(self) -> bool:
        self.calls.append("optimize")
        return bool(self._shard.optimize())  # type: ignore[attr-defined]

    def __getattr__(self, name: str) -> object:
        return getattr(self._shard, name)


def test_a_shard_written_to_closes_on_an_empty_operation(tmp_path) -> None:
    """Edge reads a shard's last logged operation back each time it loads it, so a store ends every shard it
    wrote to with `LAST_OPERATION` (a deletion of the nil id, which no point has) and leaves one it only read
    as it was: the next load then decodes an empty deletion instead of the import's last batch."""
    from mindnet.store import embedded

    path = tmp_path / "store"
    with EdgeStore(path, prefix="v") as store:
        store.ensure(SCHEMA)
        store.upsert("chunks", CHUNKS)
    calls: dict[str, list[object]] = {"chunks": [], "notes": []}
    with EdgeStore(path, prefix="v") as store:
        for name, seen in calls.items():
            store._shards[name] = _RecordingShard(store._shard(name), seen)  # type: ignore[assignment]
        store.delete_ids("chunks", [CHUNKS[0].id])
        assert store.count("notes") == 0  # read only
    assert calls["chunks"][-2:] == [embedded.LAST_OPERATION, "close"]
    assert calls["notes"] == ["close"]
    with EdgeStore(path, prefix="v") as store:  # the empty deletion removed nothing
        assert store.count("chunks") == len(CHUNKS) - 1
        store._shards["chunks"] = _RecordingShard(store._shard("chunks"), seen := [])  # type: ignore[assignment]
    assert seen == ["close"]  # a reader adds nothing to the log


def test_a_settle_lets_go_of_the_mapped_pages_before_it_optimises(tmp_path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 27: what an import read and wrote since the last release must not stay mapped through a settle's
    optimisation (at the end of a 30,000-note import, the edges the note points read lay beside the segment being
    built, the import's peak), so a settle lets the store's pages go first."""
    from mindnet.store import embedded

    monkeypatch.setattr(embedded, "SETTLE_POINTS", 3)
    calls: list[object] = []
    with EdgeStore(tmp_path / "store", prefix="v") as store:
        store.ensure(SCHEMA)
        store._shards["chunks"] = _RecordingShard(store._shard("chunks"), calls)  # type: ignore[assignment]
        monkeypatch.setattr(store, "release_pages", lambda: calls.append("release") or 0)
        store.upsert("chunks", CHUNKS)  # 5 points: one settle
        named = [c for c in calls if isinstance(c, str)]  # the upsert's own operation comes first
        assert named[:2] == ["release", "optimize"] and named.count("optimize") == 1
        assert store.count("chunks") == len(CHUNKS)


def test_two_threads_asking_for_a_shard_not_loaded_yet_share_one_load(tmp_path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """A search's e5 list runs on the index's executor beside its other lists: on a store opened a moment
    ago both threads ask for the chunks shard. A second load in the process found the WAL locked by the
    first ("in use by another mindnet process")."""
    import threading
    import time

    from mindnet.store import embedded

    path = tmp_path / "store"
    with EdgeStore(path, prefix="v") as store:
        store.ensure(SCHEMA)
        store.upsert("chunks", CHUNKS)
    load = embedded.qe.EdgeShard.load
    loads: list[str] = []

    def slow_load(folder: str) -> object:  # the first load holds the WAL while the second thread arrives
        shard = load(folder)
        loads.append(folder)
        time.sleep(0.3)
        return shard

    monkeypatch.setattr(embedded.qe.EdgeShard, "load", staticmethod(slow_load))
    with EdgeStore(path, prefix="v") as store:
        found: list[object] = []
        ready = threading.Barrier(2)

        def search() -> None:
            ready.wait()
            try:
                found.append(len(store.search_dense("chunks", "use", _unit(1, 0, 0, 0), limit=2)))
            except Exception as exc:  # what the second loader used to get
                found.append(exc)

        threads = [threading.Thread(target=search) for _ in range(2)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    assert found == [2, 2]
    assert loads == [str(path / "v_chunks")]


def test_edge_bulk_then_optimize_builds_index(tmp_path) -> None:
    rng = np.random.default_rng(7)
    vecs = rng.standard_normal((3000, 4)).astype(np.float32)
    with EdgeStore(tmp_path / "s", hnsw_m=16, hnsw_ef_construct=128) as store:
        store.ensure(SCHEMA)
        store.upsert("chunks", (PointRecord(f"n{i}#c01", {"note_id": f"n{i}"}, vectors={"use": v})
                                for i, v in enumerate(vecs)))
        store.optimize()
        q = vecs[42] / np.linalg.norm(vecs[42])
        assert store.search_dense("chunks", "use", q, limit=1)[0].id == "n42#c01"


def test_edge_bulk_writes_settle_into_immutable_segments(tmp_path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A bulk import optimises and reopens each shard every SETTLE_POINTS points (issue 27): nothing is lost,
    filters and ids still answer, and edges (no dense vector) become immutable segments thanks to the marker,
    which the caller never sees."""
    import mindnet.store.embedded as embedded

    monkeypatch.setattr(embedded, "SETTLE_POINTS", 150)
    monkeypatch.setattr(embedded, "MARKER_INDEXING_KB", 1)
    path = tmp_path / "s"
    edges = [PointRecord(f"e{i}", {"note_id": f"n{i % 37}", "kind": "references", "source_id": f"n{i}",
                                   "target_id": f"n{i + 1}"}) for i in range(1000)]
    with EdgeStore(path, prefix="v") as store:
        store.ensure(SCHEMA)
        for start in range(0, len(edges), 64):
            store.upsert("edges", edges[start:start + 64])
        store.optimize()
        assert store.count("edges") == 1000
        assert store.count("edges", Filter.all(Equals("note_id", "n5"))) == len(range(5, 1000, 37))
        got = store.retrieve("edges", ["e7"], with_vectors=True)
        assert [p.payload["target_id"] for p in got] == ["n8"] and got[0].sparse == {}
    immutable = list((path / "v_edges" / "segments").glob("*/id_tracker.i2e"))
    assert immutable, "edges stayed in appendable segments: the optimiser never indexed them"
    with EdgeStore(path, prefix="v") as store:
        assert store.count("edges", Filter.all(Equals("kind", "references"))) == 1000


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(steps=st.lists(st.tuples(st.booleans(), st.lists(st.integers(0, 60), min_size=1, max_size=25)),
                      min_size=1, max_size=12))
def test_an_unfiltered_count_is_the_number_of_live_points(tmp_path_factory, monkeypatch: pytest.MonkeyPatch,
                                                          steps: list[tuple[bool, list[int]]]) -> None:
    """EdgeStore counts a whole collection from Edge's estimate (no id is read, issue 27): through upserts of
    new and existing ids, deletes of present and absent ones and settles into immutable segments, it is the
    exact count, and the number of ids the writes left."""
    import mindnet.store.embedded as embedded

    monkeypatch.setattr(embedded, "SETTLE_POINTS", 40)
    monkeypatch.setattr(embedded, "MARKER_INDEXING_KB", 1)
    live: set[int] = set()
    with EdgeStore(tmp_path_factory.mktemp("count") / "s") as store:
        store.ensure(SCHEMA)
        for upsert, ids in steps:
            if upsert:
                store.upsert("edges", [PointRecord(f"e{i}", {"note_id": f"n{i % 7}", "kind": "references"})
                                       for i in ids])
                live |= set(ids)
            else:
                store.delete_ids("edges", [f"e{i}" for i in ids])
                live -= set(ids)
            assert store.count("edges") == len(live)
            assert store.count("edges", Filter.all(Equals("kind", "references"))) == len(live)  # exact, filtered
        store.optimize()
        assert store.count("edges") == len(live)


@settings(max_examples=4, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(seed=st.integers(0, 2**32 - 1))
def test_quantized_lists_stay_near_the_exact_scan(tmp_path_factory, monkeypatch: pytest.MonkeyPatch, seed: int) -> None:
    """Once optimised, every dense vector is read in int8 (issue 27), and the segments do hold the int8 copies
    (without them this would be the plain scan again). The plain `use` vector's best candidates are rescored
    with the stored vectors: its top 20 has the exact scores in their order. The `note` multivector's scan
    ranks by the copies as they are (`embedded._SCANNED`): scores within the int8 error of the exact MaxSim,
    in order, and nearly the exact top 20, led by the exact first."""
    import mindnet.store.embedded as embedded

    monkeypatch.setattr(embedded, "INDEXING_THRESHOLD_KB", 1)
    dim = 32
    note = VectorSpec("note", "fake-use@1", dim, multi=True)
    rng = np.random.default_rng(seed)

    def unit(rows: np.ndarray) -> np.ndarray:
        return rows / np.linalg.norm(rows, axis=-1, keepdims=True)

    windows = {f"n{i}": unit(rng.normal(size=(1 + i % 5, dim))).astype(np.float16).astype(np.float32)
               for i in range(400)}
    plain = {k: unit(rng.normal(size=dim)).astype(np.float32) for k in windows}
    path = tmp_path_factory.mktemp("quant") / "s"
    with EdgeStore(path) as store:
        store.ensure(StoreSchema(vectors=(VectorSpec("use", "fake-use@1", dim), note), chunking_hash="c1"))
        store.upsert("chunks", [PointRecord(f"{k}#c01", {"note_id": k}, {"use": plain[k].tolist(), "note": w.tolist()})
                                for k, w in windows.items()])
        store.optimize()
        for name in ("note", "use"):
            assert list(path.rglob(f"vector_storage-{name}/quantized.data")), f"the {name} vectors were not quantized"
        for _ in range(8):
            query = unit(rng.normal(size=dim))
            maxsim = {k: float((w @ query).max()) for k, w in windows.items()}
            exact = sorted(maxsim, key=maxsim.__getitem__, reverse=True)[:20]
            hits = store.search_dense("chunks", "note", query, limit=20)
            scores = [h.score for h in hits]
            assert scores == sorted(scores, reverse=True)
            # Ranked by the int8 copies as they are (`_SCANNED`): each score within their error. In 32 dimensions a
            # clipped outlier (quantile 0.99) moves a score by up to ~0.07 (worst of 480 queries over 60 seeds; 0.015
            # on average over a top 20), so the bounds are twice that.
            errors = [abs(h.score - maxsim[h.payload["note_id"]]) for h in hits]
            assert max(errors) < 0.15 and np.mean(errors) < 0.03
            found = [h.payload["note_id"] for h in hits]
            assert len(set(found) & set(exact)) >= 16 and exact[0] in found[:3]
            exact = sorted((float(v @ query) for v in plain.values()), reverse=True)[:20]
            hits = store.search_dense("chunks", "use", query, limit=20)
            assert [h.score for h in hits] == pytest.approx(exact, abs=1e-4)
            for hit in hits:
                assert hit.score == pytest.approx(float(plain[hit.payload["note_id"]] @ query), abs=1e-4)


def test_a_store_without_int8_copies_keeps_its_walk(tmp_path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A store made before the int8 copies searches with Qdrant's defaults (its float32 walk, which `SEARCH_EF`
    would make ~3x slower at 30k notes); one made now rescores and walks with `SEARCH_EF`."""
    import mindnet.store.embedded as embedded

    schema = StoreSchema(vectors=(VectorSpec("use", "fake-use@1", 4), VectorSpec("note", "fake-use@1", 4, multi=True)),
                         chunking_hash="c1")
    with EdgeStore(tmp_path / "new") as store:
        store.ensure(schema)
        assert store._params("chunks", "use") is embedded._RESCORED
        assert store._params("chunks", "note") is embedded._SCANNED  # no rescoring reads of its half floats
        assert not embedded._SCANNED.quantization.rescore
        assert embedded._RESCORED.hnsw_ef == embedded.SEARCH_EF
    monkeypatch.setattr(embedded, "_quantized", lambda: None)  # what an older release created
    with EdgeStore(tmp_path / "old") as store:
        store.ensure(schema)
        assert store._params("chunks", "use") is None
        store.upsert("chunks", [PointRecord("n1#c01", {"note_id": "n1"}, {"use": [1.0, 0.0, 0.0, 0.0]})])
        hits = store.search_dense("chunks", "use", [1.0, 0.0, 0.0, 0.0], limit=1)
        assert [h.payload["note_id"] for h in hits] == ["n1"]


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(texts=st.lists(st.lists(st.sampled_from(["alpha", "beta", "gamma", "delta"]), max_size=3), max_size=30),
       word=st.sampled_from(["alpha", "beta", "gamma", "delta", "epsilon"]), cap=st.integers(0, 6))
def test_count_up_to_is_the_count_capped(tmp_path_factory, texts: list[list[str]], word: str, cap: int) -> None:
    """`count_up_to` (a search's "is this word rare", issue 27) is `min(count, cap)` for a full-text filter,
    whatever the number of matches: it reads at most `cap` ids instead of every matching one."""
    with EdgeStore(tmp_path_factory.mktemp("cap") / "s") as store:
        store.ensure(SCHEMA)
        store.upsert("chunks", [PointRecord(f"n{i}#c01", {"note_id": f"n{i}", "text": " ".join(words) or "x"})
                                for i, words in enumerate(texts)])
        flt = Filter.all(TextMatch("text", word))
        assert store.count_up_to("chunks", flt, cap) == min(store.count("chunks", flt), cap)
        assert store.count("chunks", flt) == sum(word in words for words in texts)


MARKUP = [PointRecord("m#c01", {"note_id": "m", "text": "Fehler 404 beim Abruf"}),
          PointRecord("m#c02", {"note_id": "m", "text": '<span class="caption">Listing 3-1: Ein Programm</span>'}),
          PointRecord("m#c03", {"note_id": "m", "text": "如何实现 ist ein chinesischer Satz"})]


def _matching(store: Store, word: str) -> set[str]:
    return {p.id for p in store.scroll("chunks", Filter.all(TextMatch("text", word)))}


def test_the_text_index_finds_numbers_and_words_against_markup(open_test_store: StoreFactory) -> None:
    """The full-text index cuts words as `TEXT_TOKENIZER` does: a number is a word ("404"), and so is one
    written against a tag; a run of Chinese characters is one word, as written."""
    store = open_test_store()
    store.ensure(SCHEMA)
    store.upsert("chunks", MARKUP)
    assert _matching(store, "404") == {"m#c01"}
    assert _matching(store, "Listing") == {"m#c02"}
    assert _matching(store, "如何实现") == {"m#c03"}
    assert _matching(store, "Abruf 404") == {"m#c01"}
    assert _matching(store, "Abruf 405") == set()


def test_a_text_index_made_with_the_multilingual_tokenizer_is_made_anew(tmp_path) -> None:
    """A store made before the word tokenizer (its record names the older index layout) gets its text index
    made anew by the next `ensure`, over the chunks it holds: the multilingual one indexed no number."""
    import qdrant_edge as qe

    from mindnet.store.base import INDEX_LAYOUT, TEXT_TOKENIZER, text_tokenizer

    path = tmp_path / "store"
    with EdgeStore(path) as store:
        store.ensure(SCHEMA)
        store._update("chunks", qe.UpdateOperation.delete_field_index("text"))
        store._update("chunks", qe.UpdateOperation.create_field_index("text", qe.TextIndexParams(
            tokenizer=qe.TokenizerType.Multilingual, lowercase=True, on_disk=True)))
        store._write_meta({**store._read_meta(), "indexes": INDEX_LAYOUT.rpartition(";text:")[0]})
        store.upsert("chunks", MARKUP)
        assert _matching(store, "404") == set()  # what the older index answered
    with EdgeStore(path) as store:
        store.ensure(SCHEMA)
        assert text_tokenizer(store._shard("chunks").info().payload_schema["text"]) == TEXT_TOKENIZER
        assert _matching(store, "404") == {"m#c01"}
        assert store._read_meta()["indexes"] == INDEX_LAYOUT


def test_data_without_meta_is_refused(tmp_path) -> None:
    path = tmp_path / "store"
    with EdgeStore(path) as store:
        store.ensure(SCHEMA)
        store.upsert("chunks", CHUNKS[:1])
    (path / "mindnet.meta.json").unlink()
    with EdgeStore(path) as store, pytest.raises(StoreError, match="no record of the model"):
        store.ensure(SCHEMA)


def test_point_ids_are_uuid5_of_string_ids() -> None:
    assert point_id("haus#c01") == point_id("haus#c01")
    assert uuid.UUID(point_id("haus#c01")).version == 5
    assert point_id("haus#c01") != point_id("haus#c02")


def test_lexical_vectors() -> None:
    doc = lexical_document("Die Häuser, die Häuser!", "de")
    assert len(doc.indices) == 1  # stopword dropped, both forms stem to one term
    assert set(lexical_document("Haus", "de").indices) <= set(lexical_query("Häuser", ["de"]).indices)
    both = lexical_query("running houses", ["de", "en"])
    assert set(lexical_query("running houses", ["en"]).indices) <= set(both.indices)
    assert all(v == 1.0 for v in both.values)
    # An unsupported language falls back to neutral tokens, not an error.
    assert lexical_document("kot i pies", "pl").indices


def test_open_store_picks_adapter(tmp_path) -> None:
    with open_store(path=tmp_path / "s") as store:
        assert isinstance(store, EdgeStore)
    with open_store(path=tmp_path / "s", url=":memory:") as store:
        assert isinstance(store, ClientStore)
    with pytest.raises(StoreError, match="no store"):
        open_store()


def test_scroll_can_read_only_some_payload_fields(open_test_store: StoreFactory) -> None:
    """A no-op import reads hashes, not every note's fulltext."""
    store = open_test_store()
    store.ensure(SCHEMA)
    store.upsert("notes", [PointRecord("n1", {"note_id": "n1", "content_hash": "h", "fulltext": "x" * 1000})])
    (point,) = store.scroll("notes", fields=("content_hash",))
    assert point.id == "n1"
    assert point.payload == {"note_id": "n1", "content_hash": "h"}


def test_searches_can_read_only_some_payload_fields_and_rank_alike(open_test_store: StoreFactory) -> None:
    """A search's candidate lists read a few small fields (issue 25); the hits, scores and order are those
    of the search that reads whole payloads."""
    store = open_test_store()
    store.ensure(SCHEMA)
    store.upsert("chunks", CHUNKS)
    q, words = _unit(1, 0.05, 0.3, 0), lexical_query("Garten Tomaten Haus")
    for search in (lambda **kw: store.search_dense("chunks", "use", q, limit=5, **kw),
                   lambda **kw: store.search_sparse("chunks", words, limit=5, **kw)):
        whole, light = search(), search(fields=("note_id", "lang"))
        assert [(p.id, p.score) for p in light] == [(p.id, p.score) for p in whole]
        assert len(light) > 1
        assert all(set(p.payload) == {"chunk_id", "note_id", "lang"} for p in light)
        assert all("text" in p.payload for p in whole)


def test_facet_counts_every_value_of_an_indexed_keyword(open_test_store: StoreFactory) -> None:
    """An import lists the stored notes' states from the index, without reading payloads."""
    store = open_test_store()
    store.ensure(SCHEMA)
    states = {"a": "a|x", "b": "b|y", "c": "a|x"}  # two notes share a value: counted twice
    store.upsert("notes", [PointRecord(n, {"note_id": n, "sync_state": s}) for n, s in states.items()])
    store.upsert("notes", [PointRecord(f"plain{i}", {"note_id": f"plain{i}"}) for i in range(20)])
    assert store.facet("notes", "sync_state") == {"a|x": 2, "b|y": 1}
    assert len(store.facet("notes", "note_id")) == 23  # more values than Qdrant's default limit of 10
    with pytest.raises(ValueError, match="no keyword index"):
        store.facet("notes", "fulltext")


def test_facet_drops_values_left_in_the_index_by_a_killed_writer(tmp_path) -> None:
    """After a SIGKILL, Edge replays its WAL and keeps an overwritten value in the index with count 0;
    an import took such a value for a stored `sync_state` (R21), so facet lists only values held."""
    folder = tmp_path / "store"
    for state, kill in (("old", False), ("new", True)):
        script = UPDATE_NOTE.format(folder=str(folder), state=state, kill=kill)
        done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
        assert done.returncode == (-signal.SIGKILL if kill else 0), done.stderr
    store = EdgeStore(folder)
    try:
        store.ensure(SCHEMA)
        assert store.facet("notes", "sync_state") == {"new": 1}
    finally:
        store.close()


UPDATE_NOTE = """
import os, signal
from mindnet.store import EdgeStore, PointRecord, StoreSchema, VectorSpec
store = EdgeStore({folder!r})
store.ensure(StoreSchema(vectors=(VectorSpec("use", "fake-use@1", 4),), chunking_hash="c1"))
store.upsert("notes", [PointRecord("n1", {{"note_id": "n1", "sync_state": {state!r}}})])
if {kill}:
    os.kill(os.getpid(), signal.SIGKILL)  # no close: the next process replays the WAL
store.close()
"""


def test_has_vector_finds_the_chunks_a_tier_has_reached(open_test_store: StoreFactory) -> None:
    """The e5 fill asks which chunks still lack its vector without reading any vector (issue 26)."""
    store = open_test_store()
    store.ensure(StoreSchema(vectors=(USE, E5), chunking_hash="c1"))
    store.upsert("chunks", [*CHUNKS[:2], _chunk(9, note="neu", tags=[], text="Mit e5.", e5=[1.0, 0.0, 0.0])])
    lacking = Filter(must_not=(HasVector("e5"),))
    assert sorted(p.id for p in store.scroll("chunks", lacking, fields=("text",))) == ["haus#c01", "haus#c02"]
    assert store.count("chunks", Filter.all(HasVector("e5"))) == 1


def test_multivector_scores_by_closest_window_in_half_floats(open_test_store: StoreFactory, tmp_path) -> None:
    """A note's windows (a multivector) score by the closest one (MaxSim), stored in half floats and
    without a graph (issue 27: the note list scans every window): scores agree with float32 MaxSim to
    half-float precision, and the ranking of clearly different notes is the exact one."""
    note = VectorSpec("note", "fake-use@1", 4, multi=True)
    rng = np.random.default_rng(7)
    windows = {f"n{i}": rng.normal(size=(1 + i % 4, 4)) for i in range(40)}
    windows = {k: v / np.linalg.norm(v, axis=1, keepdims=True) for k, v in windows.items()}
    store = open_test_store()
    store.ensure(StoreSchema(vectors=(USE, note), chunking_hash="c1"))
    store.upsert("chunks", [PointRecord(f"{k}#c01", {"note_id": k, "text": k}, {"note": w.tolist()})
                            for k, w in windows.items()])
    query = rng.normal(size=4)
    query /= np.linalg.norm(query)
    exact = sorted(((float((w @ query).max()), k) for k, w in windows.items()), reverse=True)
    hits = store.search_dense("chunks", "note", query, limit=40)
    got = {h.payload["note_id"]: h.score for h in hits}
    assert set(got) == set(windows)
    assert all(abs(got[k] - s) < 2e-3 for s, k in exact)
    order = {h.payload["note_id"]: rank for rank, h in enumerate(hits)}
    assert all(order[a] < order[b] for sa, a in exact for sb, b in exact if sa - sb > 5e-3)
    if isinstance(store, EdgeStore):
        import json

        config = json.loads(next(store.path.rglob("*_chunks/edge_config.json")).read_text(encoding="utf-8"))
        assert config["vectors"]["note"].get("datatype", "").lower() == "float16"
        assert config["vectors"]["use"].get("datatype", "float32").lower() == "float32"
        assert config["vectors"]["note"]["hnsw_config"]["m"] == 0  # no graph: the note list is the exact scan
        assert "hnsw_config" not in config["vectors"]["use"]  # the collection's graph (hnsw_m)


def _store_rss_kb(folder) -> int:
    """Resident KB of this process's maps of files under `folder` (/proc/self/smaps)."""
    root = os.path.realpath(folder) + os.sep
    total, inside = 0, False
    with open("/proc/self/smaps", encoding="utf-8", errors="replace") as smaps:
        for line in smaps:
            head = line.split(maxsplit=5)
            if len(head) >= 5 and "-" in head[0] and not head[0].endswith(":"):
                inside = len(head) == 6 and head[5].strip().startswith(root)
            elif inside and line.startswith("Rss:"):
                total += int(line.split()[1])
    return total


@pytest.mark.skipif(not os.path.exists("/proc/self/smaps"), reason="maps are read from Linux's /proc")
def test_releasing_the_pages_unmaps_them_and_keeps_every_answer(tmp_path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`release_pages` (issue 27) leaves none of the store's file pages mapped in the process, and every read
    after it answers as before: the pages are mapped again from the page cache."""
    import mindnet.store.embedded as embedded

    monkeypatch.setattr(embedded, "INDEXING_THRESHOLD_KB", 1)
    rng = np.random.default_rng(3)
    vecs = rng.standard_normal((600, 4)).astype(np.float32)
    path = tmp_path / "s"
    with EdgeStore(path) as store:
        store.ensure(SCHEMA)
        store.upsert("chunks", [
            PointRecord(f"n{i}#c01", {"note_id": f"n{i}", "text": f"wort{i} haus"}, vectors={"use": v},
                        sparse={"bm25": lexical_document(f"wort{i} haus", "de")})
            for i, v in enumerate(vecs)])
        store.optimize()

        def answers() -> list[list[str]]:
            return [_ids(store.search_dense("chunks", "use", vecs[i], limit=5)) for i in range(0, 600, 97)] + [
                _ids(store.search_sparse("chunks", lexical_query("wort42", ("de",)), limit=3)),
                [p.id for p in store.retrieve("chunks", ["n7#c01"])], [str(store.count("chunks"))]]

        before = answers()
        mapped = _store_rss_kb(path)
        assert mapped > 0
        released = store.release_pages()
        assert released >= mapped * 1024 and _store_rss_kb(path) == 0
        assert answers() == before
        assert _store_rss_kb(path) > 0  # the reads mapped what they needed again


@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(steps=st.lists(st.tuples(st.sampled_from(["upsert", "delete", "release", "optimize"]),
                                st.lists(st.integers(0, 80), min_size=1, max_size=30)), min_size=1, max_size=14))
def test_pages_released_between_writes_lose_nothing(tmp_path_factory, monkeypatch: pytest.MonkeyPatch,
                                                    steps: list[tuple[str, list[int]]]) -> None:
    """Releasing the pages at any point between writes, settles and optimisations (dirty pages of maps being
    written among them) loses no write: the store, read back and reopened, holds exactly the points written."""
    import mindnet.store.embedded as embedded

    monkeypatch.setattr(embedded, "SETTLE_POINTS", 50)
    monkeypatch.setattr(embedded, "INDEXING_THRESHOLD_KB", 1)
    monkeypatch.setattr(embedded, "MARKER_INDEXING_KB", 1)
    path = tmp_path_factory.mktemp("release") / "s"
    live: dict[int, str] = {}
    with EdgeStore(path) as store:
        store.ensure(SCHEMA)
        for round_, (op, ids) in enumerate(steps):
            if op == "upsert":
                store.upsert("chunks", [PointRecord(f"n{i}#c01", {"note_id": f"n{i}", "text": f"r{round_}"},
                                                    vectors={"use": _unit(1.0, i, round_, 0.5)}) for i in ids])
                store.upsert("edges", [PointRecord(f"e{i}", {"note_id": f"n{i}", "kind": f"r{round_}"}) for i in ids])
                live.update((i, f"r{round_}") for i in ids)
            elif op == "delete":
                store.delete_ids("chunks", [f"n{i}#c01" for i in ids])
                store.delete_ids("edges", [f"e{i}" for i in ids])
                for i in ids:
                    live.pop(i, None)
            elif op == "release":
                store.release_pages()
            else:
                store.optimize()
    with EdgeStore(path) as store:
        chunks = {p.id: p.payload["text"] for p in store.scroll("chunks")}
        edges = {p.id: p.payload["kind"] for p in store.scroll("edges")}
    assert chunks == {f"n{i}#c01": text for i, text in live.items()}
    assert edges == {f"e{i}": text for i, text in live.items()}


_LARGE_BLOCK_PROBE = """
import ctypes, sys
from mindnet.store import map_large_blocks

class Info(ctypes.Structure):
    _fields_ = [(n, ctypes.c_size_t) for n in ("arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks",
                                                "fsmblks", "uordblks", "fordblks", "keepcost")]

libc = ctypes.CDLL("libc.so.6")
libc.mallinfo2.restype = Info
libc.malloc.restype, libc.malloc.argtypes, libc.free.argtypes = ctypes.c_void_p, [ctypes.c_size_t], [ctypes.c_void_p]
if sys.argv[1] == "fixed":
    assert map_large_blocks()


def mapped() -> int:
    libc.free(libc.malloc(8 << 20))  # a large block freed: glibc's own threshold rises past it
    before = libc.mallinfo2().hblks
    block = libc.malloc(2 << 20)
    out = libc.mallinfo2().hblks - before
    libc.free(block)
    return out


if sys.argv[1] == "resident":  # a resident's first import (a tiny vault, the fake model), then its rule
    import pathlib
    sys.path.insert(0, sys.argv[2])
    from fakes import FakeEmbedder
    from mindnet import Resident, Settings
    root = pathlib.Path(sys.argv[3])
    (root / "vault").mkdir()
    (root / "vault" / "a.md").write_text("# A" + chr(10) * 2 + "Text." + chr(10), encoding="utf-8")
    resident = Resident(root / "vault", Settings(store_path=str(root / "store")), watch=False, e5=False,
                        embedder=FakeEmbedder())
    before = mapped()
    resident.start().result(timeout=60)
    resident.stop()
    print(before, mapped())
else:
    print(mapped())
"""


@pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="the threshold is glibc's")
def test_a_resident_maps_large_blocks_on_their_own_after_glibc_would_have_stopped() -> None:
    """After a large block is freed, glibc serves the next ones from its heap, where what an import frees
    stays resident between the blocks that outlive it; with `map_large_blocks` each is its own mapping."""
    def mapped(mode: str) -> int:
        done = subprocess.run([sys.executable, "-c", _LARGE_BLOCK_PROBE, mode], capture_output=True, text=True,
                              timeout=60, check=True)
        return int(done.stdout.strip())

    assert mapped("glibc") == 0
    assert mapped("fixed") == 1


@pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="the threshold is glibc's")
def test_a_resident_fixes_the_threshold_once_its_first_import_is_done(tmp_path) -> None:
    """Not before: the models and the first search load faster under glibc's own rule (issue 26)."""
    tests = str(Path(__file__).resolve().parent)
    done = subprocess.run([sys.executable, "-c", _LARGE_BLOCK_PROBE, "resident", tests, str(tmp_path)],
                          capture_output=True, text=True, timeout=120, check=True)
    assert done.stdout.split()[-2:] == ["0", "1"]


_ARENA_PROBE = """
import ctypes, os, sys, tempfile, threading
from mindnet.store import limit_arenas

libc = ctypes.CDLL("libc.so.6")
libc.malloc.restype, libc.malloc.argtypes = ctypes.c_void_p, [ctypes.c_size_t]
libc.fopen.restype, libc.fopen.argtypes = ctypes.c_void_p, [ctypes.c_char_p, ctypes.c_char_p]
libc.malloc_info.argtypes, libc.fclose.argtypes = [ctypes.c_int, ctypes.c_void_p], [ctypes.c_void_p]
if sys.argv[1] == "limited":
    assert limit_arenas(1)
elif sys.argv[1] == "resident":  # made, not started: its threads come later
    import pathlib
    sys.path.insert(0, sys.argv[2])
    from fakes import FakeEmbedder
    from mindnet import Resident, Settings
    root = pathlib.Path(sys.argv[3])
    (root / "vault").mkdir()
    Resident(root / "vault", Settings(store_path=str(root / "store")), watch=False, e5=False, embedder=FakeEmbedder())
held = []
start = threading.Barrier(6)


def work() -> None:
    start.wait()
    held.extend(libc.malloc(64) for _ in range(500))  # kept: each block stays in the heap it was cut from


threads = [threading.Thread(target=work) for _ in range(6)]
for thread in threads:
    thread.start()
for thread in threads:
    thread.join()
fd, path = tempfile.mkstemp()
os.close(fd)
out = libc.fopen(path.encode(), b"w")
libc.malloc_info(0, out)
libc.fclose(out)
print(open(path).read().count("<heap nr="))
"""


@pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="the arenas are glibc's")
def test_a_residents_threads_share_at_most_two_heaps(tmp_path) -> None:
    """Issue 27: every thread that allocates gets a glibc heap of its own (up to 8 per core), and the free
    space between the blocks each keeps stays resident; a resident's threads share `RESIDENT_ARENAS`."""
    from mindnet.store.embedded import RESIDENT_ARENAS

    def heaps(*args: str) -> int:
        done = subprocess.run([sys.executable, "-c", _ARENA_PROBE, *args], capture_output=True, text=True,
                              timeout=120, check=True)
        return int(done.stdout.strip())

    assert heaps("glibc") > RESIDENT_ARENAS
    assert heaps("limited") == 1
    tests = str(Path(__file__).resolve().parent)
    assert heaps("resident", tests, str(tmp_path)) <= RESIDENT_ARENAS


def test_two_stores_of_the_same_points_rank_alike(tmp_path) -> None:
    """Edge inserts each upsert's points in a hash map's order, new in every store it opens, and its BM25 scores
    are float32 sums whose last bit follows that order; points tied at a list's last place come back in it too.
    So two imports of one vault ranked near-ties differently (`bench/golden_hits.py`). The lists keep BM25 scores
    to `SPARSE_DIGITS` and cut ties in id order: the same points give the same lists. (A score whose noise carries
    it across a rounding step still differs in its last digit.)"""
    import random

    rnd = random.Random(7)
    words = [f"wort{i}" for i in range(60)] + ["Haus", "Garten", "Regen", "Dach", "Fluss", "Tomaten"]
    texts = [" ".join(rnd.choices(words, k=rnd.randint(4, 40))) for _ in range(500)]
    texts += texts[:40]  # equal documents: equal scores
    points = [PointRecord(f"n{i // 5:03d}#c{i % 5:02d}", {"note_id": f"n{i // 5:03d}", "text": t},
                          vectors={"use": _unit(1.0, i % 7, 0.0, 0.5)}, sparse={"bm25": lexical_document(t, "de")})
              for i, t in enumerate(texts)]
    stores = []
    for name in ("a", "b"):
        store = EdgeStore(tmp_path / name)
        store.ensure(SCHEMA)
        for k in range(0, len(points), 256):
            store.upsert("chunks", points[k:k + 256])
        stores.append(store)
    try:
        for _ in range(150):
            query = lexical_query(" ".join(rnd.sample(words, 3)), ["de"])
            first, second = (s.search_sparse("chunks", query, limit=12) for s in stores)
            assert [h.id for h in first] == [h.id for h in second]
            assert [h.score for h in first] == pytest.approx([h.score for h in second], rel=1e-4)
            assert [h.score for h in first] == sorted((h.score for h in first), reverse=True)
    finally:
        for store in stores:
            store.close()
