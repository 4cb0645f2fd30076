"""BM25's document constants (k, b, avg_len) for mindnet's chunks, chosen leave one cell out (issue 15).

    .venv/bin/python bench/bm25_shape.py --work /tmp/w --cells foam,rust [--out A.json]
    .venv/bin/python bench/bm25_shape.py --work /tmp/wx --cells xquad --max-queries 100 [--out B.json]
    .venv/bin/python bench/bm25_shape.py --merge A.json B.json

`--plain-query` searches with the plain union query instead of `lexical_query(strict=True)`.

The stores of `bench/search.py loo` are opened (built if missing) and their chunk payloads and
fixed windows read once; every shape of the grid re-encodes them in memory the way the import
does (`points.contextual_lexical`: section heads index their H2 section) and searches them with
the product's `lexical_query`, scoring like the engine (IDF `ln(1 + (N - n + 0.5) / (n + 0.5))`
over the store's chunks). Per cell: nDCG@5 of the BM25 list, notes ranked by their best chunk.
The shape is then picked on the other eleven cells by the leximin of its margin over BM25 over
fixed windows with the engine's defaults (a yardstick that does not move with the knob), ties by
the mean, and reported on the held-out cell. Embedded text (`![[…]]`) is not in the payload and
is left out here; the import indexes it.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import statistics
import sys
from pathlib import Path

import cells
from mindnet.chunking.base import Chunk
from mindnet.evaluation import EvalQuery, score_query
from mindnet.points import contextual_lexical
from mindnet.search import Searcher
from mindnet.store import lexical_document
from mindnet.store.lexical import MEASURED_BM25, PLAIN_BM25, Bm25Shape
from search import limit_queries
from variants import Bm25Index

GRID = tuple(Bm25Shape(1.2, b, avg) for b in (0.3, 0.5, 0.75, 0.9, 1.0) for avg in (256.0, 150.0, 100.0, 64.0, 32.0))
"""The shapes tried: `b` from weak to full length normalisation, the assumed average from the
engine's 256 tokens down to below a short chunk's length."""
_FIELDS = tuple(f.name for f in dataclasses.fields(Chunk))


def _chunk(payload: dict[str, object]) -> Chunk:
    """A stored chunk payload back as a `Chunk` (lists become tuples), for `contextual_lexical`."""
    return Chunk(**{f: tuple(v) if isinstance(v := payload.get(f), list) else v for f in _FIELDS})  # type: ignore[arg-type]


@dataclasses.dataclass
class Corpus:
    """What one store gives every shape: its chunks, its fixed windows and how a note is judged."""

    chunks: list[Chunk]
    windows: list[tuple[str, str, str | None, str]]
    """(window id, note id, language, text)."""
    paths: dict[str, str]
    key: dict[str, str] | None


def load_corpus(real: Searcher, fixed: Searcher, key: dict[str, str] | None) -> Corpus:
    chunks = [_chunk(p.payload) for p in real.store.scroll("chunks")]
    windows = [(p.id, str(p.payload["note_id"]), p.payload.get("lang"), str(p.payload.get("text", "")))
               for p in fixed.store.scroll("chunks")]
    paths = {p.id: str(p.payload.get("path", "")) for p in real.store.scroll("notes", fields=["path"])}
    return Corpus(chunks, windows, paths, key)


def ndcg(index: Bm25Index, note_of: dict[str, str], corpus: Corpus, queries: list[EvalQuery],
         langs: tuple[str, ...], strict: bool) -> float:
    """Mean nDCG@5 of the BM25 list, notes ranked by their best chunk."""
    scores = []
    for q in queries:
        notes = list(dict.fromkeys(note_of[k] for k, _ in index.search(q.query, langs, strict=strict)))[:10]
        keys = [corpus.key.get(corpus.paths.get(n, ""), "") if corpus.key is not None else n for n in notes]
        scores.append(score_query(keys, q.gains).ndcg_5)
    return statistics.mean(scores)


def measure(args: argparse.Namespace) -> dict[str, dict[str, float]]:
    """nDCG@5 per shape label (and the fixed-window yardsticks) per cell."""
    work = Path(args.work)
    out: dict[str, dict[str, float]] = {}
    with contextlib.ExitStack() as stack:
        embedder = cells.shared_embedder(work)
        stack.callback(embedder.cache.close)
        wanted = [c for c in cells.CELLS if any(c.name.startswith(p) for p in args.cells.split(","))]
        corpora = cells.open_corpora(stack, work, embedder, cells.base_settings(),
                                     {c.corpus for c in wanted}, args.max_queries)
        loaded = {name: load_corpus(real, fixed, key) for name, (real, fixed, key) in corpora.items()}
        for spec in wanted:
            real = corpora[spec.corpus][0]
            corpus, langs = loaded[spec.corpus], tuple(real.settings.languages)
            queries = cells.cell_queries(spec, real, args.max_queries, limit_queries)
            note_of = {c.chunk_id: c.note_id for c in corpus.chunks} | {w: n for w, n, _, _ in corpus.windows}
            row: dict[str, float] = {}
            for label, shape in (("windows plain", PLAIN_BM25), ("windows measured shape", MEASURED_BM25)):
                vecs = [dict(zip(v.indices, v.values, strict=True))
                        for v in (lexical_document(t, lang, shape) for _, _, lang, t in corpus.windows)]
                row[label] = ndcg(Bm25Index.from_vectors([w for w, _, _, _ in corpus.windows], vecs),
                                  note_of, corpus, queries, langs, not args.plain_query)
            for shape in GRID:
                vecs = [dict(zip(v.indices, v.values, strict=True))
                        for v in contextual_lexical(corpus.chunks, {}, True, shape)]
                row[_label(shape)] = ndcg(Bm25Index.from_vectors([c.chunk_id for c in corpus.chunks], vecs),
                                          note_of, corpus, queries, langs, not args.plain_query)
            out[spec.name] = row
            print(f"  {spec.name}: {len(queries)} questions, {len(GRID)} shapes", file=sys.stderr, flush=True)
    return out


def _label(shape: Bm25Shape) -> str:
    return f"k={shape.k} b={shape.b} avg_len={shape.avg_len:g}"


def report(figures: dict[str, dict[str, float]]) -> None:
    """The grid per cell, the in-sample pick and each held-out cell's pick."""
    names = list(figures)
    refs = {n: figures[n]["windows plain"] for n in names}
    labels = [_label(s) for s in GRID]
    scores = {i: {n: figures[n][lab] for n in names} for i, lab in enumerate(labels)}
    held = cells.leave_one_out(scores, refs, names)
    current = labels.index(_label(MEASURED_BM25)) if _label(MEASURED_BM25) in labels else None
    print("| cell | bm25 windows (engine defaults) | bm25 windows (measured shape) | engine defaults | "
          "measured shape | out of sample | pick |")
    print("|---|---|---|---|---|---|---|")
    for n in names:
        i, v = held[n]
        cur = f"{scores[current][n]:.3f}" if current is not None else "–"
        print(f"| {n} | {refs[n]:.3f} | {figures[n]['windows measured shape']:.3f} | "
              f"{figures[n][_label(PLAIN_BM25)]:.3f} | {cur} | {v:.3f} | {labels[i]} |")
    print(f"| mean | {statistics.mean(refs.values()):.3f} | "
          f"{statistics.mean(figures[n]['windows measured shape'] for n in names):.3f} | "
          f"{statistics.mean(figures[n][_label(PLAIN_BM25)] for n in names):.3f} | "
          + (f"{statistics.mean(scores[current][n] for n in names):.3f}" if current is not None else "–")
          + f" | {statistics.mean(v for _, v in held.values()):.3f} | |")
    print(f"\nin sample: {labels[cells.pick(scores, refs, names)]}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--work", default="/tmp/mindnet-bench-loo")
    parser.add_argument("--cells", default="foam,rust,xquad")
    parser.add_argument("--max-queries", type=int, default=300)
    parser.add_argument("--plain-query", action="store_true", help="the plain union query, not strict=True")
    parser.add_argument("--out", default=None, help="write the figures (JSON) here, for --merge")
    parser.add_argument("--merge", nargs="+", default=None, help="report the figures of several --out files")
    args = parser.parse_args(argv)
    if args.merge:
        figures: dict[str, dict[str, float]] = {}
        for f in args.merge:
            figures.update(json.loads(Path(f).read_text(encoding="utf-8")))
    else:
        figures = measure(args)
        if args.out:
            Path(args.out).write_text(json.dumps(figures, indent=1, ensure_ascii=False), encoding="utf-8")
    report(figures)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
