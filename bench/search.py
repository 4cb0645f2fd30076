"""Search quality and latency (R22, R28): decides the default search mode and the fusion knobs.

Two commands, run from the repo root:

    .venv/bin/python bench/search.py eval [--work DIR] [--max-queries N] [--sets foam,rust,xquad]
    .venv/bin/python bench/search.py latency [--sizes 1000,10000,100000] [--queries 50]

`eval` imports each corpus with the real pipeline (`import_vault`, USE model) into `--work`
(kept, so a second run reuses the embedding cache) and prints one metrics table per question
set: foam-docs golden (English notes; keyword, conceptual, German-question and syntax
categories), rustbook-de golden (German), XQuAD de, en and cross-lingual (German questions
against the English paragraphs), each for BM25 alone, dense, hybrid (language-aware RRF in
Python, the default), hybrid with plain engine RRF, hybrid with other cross-language lexical
weights, and hybrid + graph expansion.

`latency` builds synthetic Edge stores (random unit vectors, BM25 vectors of random vocabulary
text, 10 chunks per note with prev/next and 3 links per note) and times end-to-end searches
(query embedding with the real model + search) for dense, hybrid and hybrid+expand: p50/p95.
No assertions: figures only.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from mindnet.config import load_settings
from mindnet.embedding import UseEmbedder
from mindnet.evaluation import (
    BeirSet,
    EvalReport,
    RunConfig,
    evaluate_beir,
    evaluate_vault,
    format_table,
    load_beir,
)
from mindnet.search import Searcher, SearchTuning
from mindnet.store import EdgeStore, PointRecord, StoreSchema, VectorSpec, lexical_document

CORPORA = Path("/work/shared/corpora")
GOLDEN = Path(__file__).parent / "golden"

RUNS: tuple[RunConfig, ...] = (
    RunConfig("lexical", label="bm25"),
    RunConfig("dense"),
    RunConfig("hybrid", label="hybrid (default: lang-RRF k=10 w=0.25)"),
    RunConfig("hybrid", tuning=SearchTuning(language_fusion=False, rrf_k=60), label="hybrid (engine RRF k=60)"),
    RunConfig("hybrid", tuning=SearchTuning(lexical_weight_other=1.0), label="hybrid (py RRF k=10 w=1)"),
    RunConfig("hybrid", tuning=SearchTuning(lexical_weight_other=0.0), label="hybrid (lang-RRF k=10 w=0)"),
    RunConfig("hybrid", expand=True, label="hybrid+expand"),
    RunConfig("hybrid", expand=True, tuning=SearchTuning(link_boost=0.1), label="hybrid+expand boost=0.1"),
)


# ---------------------------------------------------------------------------------------------
# eval
# ---------------------------------------------------------------------------------------------


def cross_lingual(queries_from: BeirSet, corpus_from: BeirSet, src: str, dst: str) -> BeirSet:
    """`queries_from`'s questions against `corpus_from`'s documents: XQuAD ids swap `-src-` for `-dst-`."""
    qrels = {q: {d.replace(f"xquad-{src}-", f"xquad-{dst}-"): s for d, s in rel.items()}
             for q, rel in queries_from.qrels.items()}
    return BeirSet(corpus_from.corpus, queries_from.queries, qrels)


def limit_queries(beir: BeirSet, n: int | None, seed: int = 7) -> BeirSet:
    """A fixed random sample of `n` queries (all when None), so runs stay comparable."""
    if not n or n >= len(beir.queries):
        return beir
    keys = sorted(beir.queries)
    random.Random(seed).shuffle(keys)
    keep = set(keys[:n])
    return BeirSet(beir.corpus, {k: v for k, v in beir.queries.items() if k in keep},
                   {k: v for k, v in beir.qrels.items() if k in keep})


def run_eval(args: argparse.Namespace) -> list[EvalReport]:
    work = Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    embedder = UseEmbedder()
    sets = set(args.sets.split(","))
    reports: list[EvalReport] = []

    def show(new: list[EvalReport], title: str) -> None:
        reports.extend(new)
        print(f"\n### {title}\n\n{format_table(new, categories=args.categories)}\n", flush=True)

    if "foam" in sets:
        settings = load_settings(overrides={"store_path": str(work / "foam-docs")})
        show(evaluate_vault(CORPORA / "foam-docs/vault", GOLDEN / "foam-docs.jsonl", settings, RUNS,
                            embedder=embedder, dataset="foam-docs"), "foam-docs golden (vault, per note)")
    if "rust" in sets:
        settings = load_settings(overrides={"store_path": str(work / "rustbook-de")})
        show(evaluate_vault(CORPORA / "rustbook-de/src", GOLDEN / "rustbook-de.jsonl", settings, RUNS,
                            embedder=embedder, dataset="rustbook-de"), "rustbook-de golden (vault, per note)")
    if "xquad" in sets:
        base = load_settings()
        de = load_beir(CORPORA / "xquad/beir/de")
        en = load_beir(CORPORA / "xquad/beir/en")
        for name, data, folder in (
            ("xquad-de", de, "xquad-de"),
            ("xquad-en", en, "xquad-en"),
            ("xquad-de->en", cross_lingual(de, en, "de", "en"), "xquad-en"),
        ):
            data = limit_queries(data, args.max_queries)
            show(evaluate_beir(data, base, RUNS, embedder=embedder, work_dir=work / folder, dataset=name),
                 f"{name} (BEIR, paragraph = note)")
    if args.json:
        Path(args.json).write_text(json.dumps([_summary(r) for r in reports], indent=1), encoding="utf-8")
    return reports


def _summary(r: EvalReport) -> dict[str, object]:
    d = dataclasses.asdict(r)
    d.pop("queries")
    return d


# ---------------------------------------------------------------------------------------------
# latency
# ---------------------------------------------------------------------------------------------

QUERIES = [
    "how do I link to a heading in another note", "Wie erstelle ich eine tägliche Notiz?",
    "publish notes as a website", "Fehlerbehandlung mit Result", "graph view colors", "Vorlagen für Notizen",
    "ownership and borrowing rules", "Tests parallel ausführen", "embed a block from another note",
    "Umgebungsvariablen lesen",
]


def synthetic_store(folder: Path, n_chunks: int, dim: int, vocab: list[str], seed: int = 1) -> EdgeStore:
    """A store of `n_chunks` random chunks: 10 per note, prev/next neighbours, 3 links per note."""
    rng = np.random.default_rng(seed)
    store = EdgeStore(folder, prefix="bench")
    store.ensure(StoreSchema(vectors=(VectorSpec("use", "synthetic@1", dim),)))
    n_notes = max(1, n_chunks // 10)
    started = time.perf_counter()
    batch: list[PointRecord] = []
    for i in range(n_chunks):
        note, idx = divmod(i, 10)
        vec = rng.standard_normal(dim).astype(np.float32)
        vec /= np.linalg.norm(vec)
        words = rng.choice(len(vocab), size=40)
        text = " ".join(vocab[w] for w in words)
        lang = "de" if note % 2 else "en"
        cid = f"n{note}#c{idx + 1:02d}"
        payload = {"note_id": f"n{note}", "chunk_id": cid, "path": f"notes/n{note}.md", "note_title": f"Note {note}",
                   "text": text, "lang": lang, "section_path": "/", "section_title": "", "char_start": 0,
                   "char_end": len(text), "line_start": 1, "line_end": 1, "type": "note", "tags": [],
                   "neighbors": {"prev": f"n{note}#c{idx:02d}" if idx else None,
                                 "next": f"n{note}#c{idx + 2:02d}" if idx < 9 else None}}
        batch.append(PointRecord(cid, payload, vectors={"use": vec}, sparse={"bm25": lexical_document(text, lang)}))
        if len(batch) >= 1024:
            store.upsert("chunks", batch)
            batch = []
    if batch:
        store.upsert("chunks", batch)
    edges = []
    for note in range(n_notes):
        for target in rng.choice(n_notes, size=3):
            key = f"references:n{note}#c01->n{target}"
            edges.append(PointRecord(key, {"kind": "references", "scope": "chunk", "source_id": f"n{note}#c01",
                                           "target_id": f"n{target}", "note_id": f"n{note}", "status": "resolved"}))
            edges.append(PointRecord(f"backlink:n{target}->n{note}", {
                "kind": "backlink", "scope": "note", "source_id": f"n{target}", "target_id": f"n{note}",
                "note_id": f"n{note}", "status": "resolved"}))
    store.upsert("edges", edges)
    store.optimize()
    print(f"  built {n_chunks} chunks / {len(edges)} edges in {time.perf_counter() - started:.0f}s", flush=True)
    return store


def run_latency(args: argparse.Namespace) -> None:
    embedder = UseEmbedder()
    settings = load_settings()
    vocab = _vocabulary()
    embedder.embed_query("warm up")
    print("| chunks | run | p50 ms | p95 ms | embed p50 ms |\n|---|---|---|---|---|")
    for size in (int(s) for s in args.sizes.split(",")):
        with tempfile.TemporaryDirectory(prefix="mindnet-bench-") as tmp:
            print(f"  building {size} …", file=sys.stderr, flush=True)
            store = synthetic_store(Path(tmp), size, embedder.dim, vocab)
            searcher = Searcher(store, embedder, settings)
            for label, mode, expand in (("dense", "dense", False), ("hybrid", "hybrid", False),
                                        ("hybrid+expand", "hybrid", True)):
                times, embeds = [], []
                for i in range(args.queries + 3):
                    q = QUERIES[i % len(QUERIES)] + (f" {i}" if i >= len(QUERIES) else "")
                    t0 = time.perf_counter()
                    embedder.embed_query(q)
                    t1 = time.perf_counter()
                    searcher.search(q, k=10, mode=mode, expand=expand)  # type: ignore[arg-type]
                    t2 = time.perf_counter()
                    if i >= 3:  # warm-up
                        # search() embeds the query itself: t2 - t1 is end to end; t1 - t0 the model alone
                        times.append((t2 - t1) * 1000)
                        embeds.append((t1 - t0) * 1000)
                times.sort()
                p95 = times[min(len(times) - 1, int(0.95 * len(times)))]
                print(f"| {size} | {label} | {statistics.median(times):.1f} | {p95:.1f} | "
                      f"{statistics.median(embeds):.1f} |", flush=True)
            store.close()


def _vocabulary() -> list[str]:
    """Real words (German and English) from the shared corpora, so BM25 postings look natural."""
    words: dict[str, None] = {}
    for folder in ("foam-docs/vault", "rustbook-de/src"):
        for path in sorted((CORPORA / folder).rglob("*.md"))[:60]:
            for w in path.read_text(encoding="utf-8", errors="replace").split():
                w = w.strip(".,:;()[]`*_#\"'").lower()
                if w.isalpha() and 3 <= len(w) <= 15:
                    words[w] = None
    return list(words)[:20000]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    ev = sub.add_parser("eval", help="metrics tables on the golden sets and XQuAD")
    ev.add_argument("--work", default="/tmp/mindnet-bench-search")
    ev.add_argument("--sets", default="foam,rust,xquad")
    ev.add_argument("--max-queries", type=int, default=None, help="sample of XQuAD queries (all 1190 by default)")
    ev.add_argument("--categories", action=argparse.BooleanOptionalAction, default=True)
    ev.add_argument("--json", default=None, help="also write the reports (without per-query rows) here")
    lat = sub.add_parser("latency", help="p50/p95 at several store sizes")
    lat.add_argument("--sizes", default="1000,10000,100000")
    lat.add_argument("--queries", type=int, default=50)
    args = parser.parse_args(argv)
    if args.command == "eval":
        run_eval(args)
    else:
        run_latency(args)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
