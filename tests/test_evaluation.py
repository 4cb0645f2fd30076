"""`mindnet eval` (R28): metric functions against hand-computed values, loaders, and small end-to-end runs."""

from __future__ import annotations

import dataclasses
import itertools
import json
import math
from pathlib import Path

import pytest

from fakes import FakeEmbedder
from mindnet.config import load_settings
from mindnet.errors import MindnetError
from mindnet.evaluation import (
    BeirDoc,
    BeirSet,
    EvalQuery,
    Metrics,
    RawQuery,
    RunConfig,
    beir_queries,
    dcg,
    evaluate_beir,
    evaluate_vault,
    fixed_windows,
    format_table,
    hit_at_1,
    load_beir,
    load_vault_queries,
    mean_metrics,
    ndcg_at_k,
    recall_at_k,
    reciprocal_rank,
    resolve_queries,
    score_query,
    write_beir_vault,
)

GAINS = {"a": 1.0, "c": 0.5, "d": 1.0}
"""a and d relevant, c partial."""


# -- metrics (hand-computed) ------------------------------------------------------------------


def test_dcg() -> None:
    assert dcg([]) == 0.0
    # 1/log2(2) + 0/log2(3) + 0.5/log2(4) = 1 + 0 + 0.25
    assert dcg([1.0, 0.0, 0.5]) == pytest.approx(1.25)


def test_ndcg() -> None:
    ideal3 = 1 + 1 / math.log2(3) + 0.5 / 2  # gains sorted: 1, 1, 0.5 -> 1.8809298
    assert ndcg_at_k(["a", "b", "c"], GAINS, 3) == pytest.approx(1.25 / ideal3)
    assert ndcg_at_k(["a", "b", "c"], GAINS, 3) == pytest.approx(0.664565, abs=1e-6)  # 1.25 / 1.8809298
    assert ndcg_at_k(["a", "d", "c"], GAINS, 10) == pytest.approx(1.0)
    assert ndcg_at_k(["x", "y"], GAINS, 10) == 0.0
    # k=1: only the top counts; the ideal top is 1.0
    assert ndcg_at_k(["c", "a"], GAINS, 1) == pytest.approx(0.5)
    # a duplicate counts once: ["a", "a", "d"] is ["a", "d"]
    assert ndcg_at_k(["a", "a", "d"], GAINS, 2) == pytest.approx(ndcg_at_k(["a", "d"], GAINS, 2))
    assert ndcg_at_k(["a"], {}, 10) == 0.0


def test_recall() -> None:
    assert recall_at_k(["a", "b", "c"], GAINS, 10) == pytest.approx(0.5)  # partial c does not count
    assert recall_at_k(["b", "d", "a"], GAINS, 2) == pytest.approx(0.5)
    assert recall_at_k(["b", "d", "a"], GAINS, 3) == pytest.approx(1.0)
    assert recall_at_k(["a"], {"c": 0.5}, 10) == 0.0


def test_reciprocal_rank_and_hit_at_1() -> None:
    assert reciprocal_rank(["x", "c", "a"], GAINS) == pytest.approx(1 / 3)  # c is only partial
    assert reciprocal_rank(["x", "c", "a"], GAINS, 2) == 0.0
    assert reciprocal_rank(["d"], GAINS) == 1.0
    assert hit_at_1(["d", "x"], GAINS) == 1.0
    assert hit_at_1(["c", "a"], GAINS) == 0.0


def test_score_and_mean() -> None:
    m = score_query(["x", "a"], GAINS)
    ideal5 = 1 + 1 / math.log2(3) + 0.5 / 2
    assert m == Metrics(1, pytest.approx((1 / math.log2(3)) / ideal5), pytest.approx((1 / math.log2(3)) / ideal5),
                        0.5, 0.5, 0.0)
    avg = mean_metrics([Metrics(1, 1.0, 1.0, 1.0, 1.0, 1.0), Metrics(1, 0.0, 0.5, 0.0, 0.5, 0.0)])
    assert avg == Metrics(2, 0.5, 0.75, 0.5, 0.75, 0.5)
    assert mean_metrics([]).n == 0


# -- inputs -------------------------------------------------------------------------------------


def test_load_vault_queries(tmp_path: Path) -> None:
    path = tmp_path / "q.jsonl"
    path.write_text(
        '{"query": "one", "relevant": "a.md", "category": "keyword", "id": "q-a"}\n\n'
        '{"query": "two", "relevant": ["b", "c.md"], "partial": ["d"]}\n', encoding="utf-8")
    assert load_vault_queries(path) == [
        RawQuery("q-a", "one", ("a.md",), (), "keyword"),
        RawQuery("q3", "two", ("b", "c.md"), ("d",), None),
    ]
    path.write_text('{"query": "one"}\n', encoding="utf-8")
    with pytest.raises(MindnetError, match=r"q.jsonl:1"):
        load_vault_queries(path)
    path.write_text('{"query": "one", "relevant": []}\n', encoding="utf-8")
    with pytest.raises(MindnetError, match="empty"):
        load_vault_queries(path)


def test_load_beir(tmp_path: Path) -> None:
    (tmp_path / "corpus.jsonl").write_text('{"_id": "d1", "title": "T", "text": "x"}\n', encoding="utf-8")
    (tmp_path / "queries.jsonl").write_text('{"_id": "q1", "text": "x?"}\n{"_id": "q2", "text": "y?"}\n',
                                            encoding="utf-8")
    (tmp_path / "qrels.tsv").write_text("query-id\tcorpus-id\tscore\nq1\td1\t1\nq2\td1\t0\n", encoding="utf-8")
    beir = load_beir(tmp_path)
    assert beir.corpus == (BeirDoc("d1", "T", "x"),)
    assert beir.qrels == {"q1": {"d1": 1.0}, "q2": {"d1": 0.0}}
    assert [q.query_id for q in beir_queries(beir)] == ["q1"]  # no positive judgement, no query
    with pytest.raises(MindnetError, match=r"missing\.tsv"):
        load_beir(tmp_path, qrels_file="missing.tsv")


def test_load_beir_cross_lingual_maps_judgements_by_position(tmp_path: Path) -> None:
    for lang, docs in (("de", ("de-1", "de-2")), ("en", ("en-1", "en-2"))):
        folder = tmp_path / lang
        folder.mkdir()
        (folder / "corpus.jsonl").write_text("".join(json.dumps({"_id": d, "text": d}) + "\n" for d in docs),
                                             encoding="utf-8")
        (folder / "queries.jsonl").write_text(json.dumps({"_id": f"{lang}-q", "text": lang}) + "\n",
                                              encoding="utf-8")
        (folder / "qrels.tsv").write_text(f"query-id\tcorpus-id\tscore\n{lang}-q\t{docs[1]}\t1\n", encoding="utf-8")
    cross = load_beir(tmp_path / "en", queries_from=tmp_path / "de")
    assert [d.doc_id for d in cross.corpus] == ["en-1", "en-2"]
    assert cross.queries == {"de-q": "de"}
    assert cross.qrels == {"de-q": {"en-2": 1.0}}
    with (tmp_path / "en" / "corpus.jsonl").open("a", encoding="utf-8") as fh:
        fh.write(json.dumps({"_id": "en-3", "text": "x"}) + "\n")
    with pytest.raises(MindnetError, match="not parallel"):
        load_beir(tmp_path / "en", queries_from=tmp_path / "de")


def test_fixed_windows_tile_the_text() -> None:
    from mindnet.chunking.tokens import default_tokenizer

    tok = default_tokenizer()
    text = "  ".join(f"Sentence number {i} says something." for i in range(60))
    spans = fixed_windows(text, tok, 50)
    assert spans[0][0] == 0 and spans[-1][1] == len(text)
    assert all(a[1] == b[0] for a, b in itertools.pairwise(spans))  # consecutive, no overlap
    starts = [a for a, _ in tok.pieces(text)]
    assert [a for a, _ in spans] == starts[::50]  # every window starts at token 0, 50, 100, ...
    assert fixed_windows("   ", tok) == []
    with pytest.raises(MindnetError):
        fixed_windows(text, tok, 0)


def test_write_beir_vault_uses_safe_names(tmp_path: Path) -> None:
    beir = BeirSet((BeirDoc("a/b:c", "Title: with colon", "Body."), BeirDoc("x", "", "Other.")), {}, {})
    paths = write_beir_vault(beir, tmp_path)
    assert paths == {"1.md": "a/b:c", "2.md": "x"}
    text = (tmp_path / "1.md").read_text(encoding="utf-8")
    assert "\n# Title: with colon\n\nBody.\n" in text
    assert (tmp_path / "2.md").read_text(encoding="utf-8").endswith("# x\n\nOther.\n")


def test_format_table() -> None:
    from mindnet.evaluation import EvalReport

    m = Metrics(2, 0.5, 0.75, 0.5, 0.75, 0.5)
    table = format_table([EvalReport("set", "dense", m, {"kw": m}, 12.34, 20.0)])
    assert "| set | dense | 2 | 0.500 | 0.750 | 0.500 | 0.750 | 0.500 | 12.3 |" in table
    assert "| set [kw] | dense |" in table


# -- end to end (fake embedder, real store and importer) ----------------------------------------


def test_evaluate_beir_lexical_is_perfect_on_exact_words(tmp_path: Path) -> None:
    beir = BeirSet(
        (BeirDoc("d-apple", "Apples", "Apples grow on trees in orchards."),
         BeirDoc("d-rust", "Rust", "Rust is a systems programming language."),
         BeirDoc("d-tide", "Tides", "The moon pulls the oceans and makes tides.")),
        {"q1": "orchards trees", "q2": "programming language", "q3": "moon oceans"},
        {"q1": {"d-apple": 1}, "q2": {"d-rust": 1}, "q3": {"d-tide": 1}},
    )
    settings = load_settings(env={})
    reports = evaluate_beir(beir, settings, [RunConfig("lexical"), RunConfig("hybrid", expand=True)],
                            embedder=FakeEmbedder(), work_dir=tmp_path, dataset="tiny")
    lexical = reports[0]
    assert (lexical.dataset, lexical.run) == ("tiny", "lexical")
    assert lexical.overall == Metrics(3, 1.0, 1.0, 1.0, 1.0, 1.0)
    assert [q.ranked[0] for q in lexical.queries] == ["d-apple", "d-rust", "d-tide"]
    assert reports[1].run == "hybrid+expand"
    assert lexical.latency_ms_median > 0
    json.dumps(dataclasses.asdict(lexical))  # `--json` output


def test_evaluate_vault_resolves_paths_and_ids(tmp_path: Path) -> None:
    vault = tmp_path / "vault"
    (vault / "sub").mkdir(parents=True)
    (vault / "sub" / "apples.md").write_text("# Apples\n\nApples grow on trees in orchards.\n", encoding="utf-8")
    (vault / "rust.md").write_text("---\nid: lang-rust\n---\n# Rust\n\nRust is a programming language.\n",
                                   encoding="utf-8")
    queries = tmp_path / "q.jsonl"
    queries.write_text(
        json.dumps({"query": "orchards", "relevant": ["sub/apples.md"], "partial": ["lang-rust"], "category": "kw"})
        + "\n" + json.dumps({"query": "programming", "relevant": ["rust"], "category": "kw"}) + "\n",
        encoding="utf-8")
    settings = load_settings(env={}, overrides={"store_path": str(tmp_path / "store")})
    runs = [RunConfig("lexical"), RunConfig("lexical", chunker="fixed")]
    report, fixed = evaluate_vault(vault, queries, settings, runs, embedder=FakeEmbedder())
    assert report.overall.hit_1 == 1.0 and report.overall.n == 2
    assert set(report.per_category) == {"kw"}
    # the fixed-window baseline: its own store, same questions, same answers on exact words
    assert fixed.run == "lexical (fixed 300-token windows)"
    assert fixed.overall.hit_1 == 1.0
    assert (tmp_path / "store" / "baseline-fixed" / "fingerprint.txt").is_file()
    # a typo in the judgements is an error, not a silent zero
    queries.write_text(json.dumps({"query": "x", "relevant": ["nope.md"]}) + "\n", encoding="utf-8")
    with pytest.raises(MindnetError, match=r"nope\.md"):
        evaluate_vault(vault, queries, settings, [RunConfig("lexical")], embedder=FakeEmbedder())


def test_resolve_queries_takes_the_higher_gain() -> None:
    class Notes:
        def scroll(self, collection: str) -> list[object]:
            from mindnet.store import StoredPoint

            return [StoredPoint("n1", {"path": "a/n1.md"}), StoredPoint("n2", {"path": "n2.md"})]

    raw = [RawQuery("q", "x", ("a/n1.md",), ("n1", "n2"))]
    (q,) = resolve_queries(raw, Notes())  # type: ignore[arg-type]
    assert q == EvalQuery("q", "x", {"n1": 1.0, "n2": 0.5}, None)


def test_runs_on_the_e5_tier(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from mindnet.api import Index
    from mindnet.embedding import Embedder

    made: list[str] = []

    def fake_make(name: str, threads: int = 0, cache_dir: str | None = None) -> Embedder:
        made.append(name)
        return FakeEmbedder(dim=16, model_id="fake-e5@1")

    monkeypatch.setattr("mindnet.api.make_embedder", fake_make)
    monkeypatch.setattr("mindnet.api.e5_available", lambda: True)
    vault = tmp_path / "vault"
    vault.mkdir()
    (vault / "apples.md").write_text("# Apples\n\nApples grow on trees in orchards.\n", encoding="utf-8")
    (vault / "rust.md").write_text("# Rust\n\nRust is a programming language.\n", encoding="utf-8")
    queries = tmp_path / "q.jsonl"
    queries.write_text(json.dumps({"query": "apples orchards", "relevant": ["apples.md"]}) + "\n", encoding="utf-8")
    settings = load_settings(env={}, overrides={"store_path": str(tmp_path / "store")})
    runs = [RunConfig("dense", dense_vector="e5", label="dense (e5)"), RunConfig("hybrid")]
    # without the tier, a run that needs it says so instead of measuring something else
    with pytest.raises(MindnetError, match="e5"):
        evaluate_vault(vault, queries, settings, runs, embedder=FakeEmbedder())
    with Index(vault, settings, embedder=FakeEmbedder(), e5=FakeEmbedder(dim=16, model_id="fake-e5@1")) as index:
        index.import_vault(e5=True)
    made.clear()
    e5, hybrid = evaluate_vault(vault, queries, settings, runs, embedder=FakeEmbedder())
    assert e5.run == "dense (e5)" and e5.overall.hit_1 == 1.0
    assert hybrid.overall.hit_1 == 1.0
    assert made == ["e5"]  # one model for every run
