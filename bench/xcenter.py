"""Cross-lingual dense candidates (issue 15): language centering and dense feedback, out of sample.

    nice -n 10 .venv/bin/python bench/xcenter.py run --work DIR --cells "foam en→en,foam de→en,rust,xquad" \\
        --max-queries 100 --out X.json
    .venv/bin/python bench/xcenter.py table X.json

In the cross-lingual cells BM25 is nearly useless and the default is about the dense list, so
the dense list itself has to get better across languages. Every candidate here changes only
how the `use` query vector meets the stored chunk vectors; the lexical lists, the fusion and
its knobs are the product's (`SearchTuning()`). Each candidate's dense list is computed in
numpy over the stored vectors (the same cosine top 150 the store returns, checked per cell),
put in place of the store's dense list, and replayed both alone and through `fuse` (the
feedback queries the new first pass asks go to the real store).

Candidates, each a family whose knob (including *off*) is picked per cell by the
leave-one-cell-out rule of `bench/search.py loo` (leximin of the margin over the cell's best
single list, ties by mean):

* `center`: subtract each language's mean vector (Libovický et al. 2020): documents by their
  chunk's language, the query by its detected language odds, each by α, then unit length.
  The means come from the store itself (`store`), or from other corpora than the cell's
  (`shipped`: foam's, the Rust book's and XQuAD's chunks, the cell's own family left out), which
  stands for a fixed set of sentences shipped per language: a vector that must not depend on
  the rest of the vault.
* `shift`: the documents stay; per target language L, the query searches with
  `unit(q - α·μ(query language) + α·μ(L))` and scores L's chunks only (one search per language).
* `rocchio`: `unit(q + β · mean of the first pass's top m chunk vectors)`, searched once more;
  `cross` only when the query's likeliest language differs from most of the top m chunks'.
* `project`: both sides lose α of their component on the language axis unit(μ_de - μ_en).
* `offset`: cos(q, d) - α·q·μ(lang(d)), a per-language constant (order within a language kept).
* `csls`: cos(q, d) - γ · hubness(d), by the chunk's 10 nearest chunks or the store's centroid.
* `query without stopwords`: the query embedded again without the words that are stopwords in any
  vault language, mixed with the plain vector; for every chunk, only for another language's chunks,
  or fused beside the plain dense list.

`table` prints, per family: the dense list alone and the fused default, each cell out of
sample, before (off) and after, the picked knob per fold, and each setting's in-sample figures.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import re
import statistics
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

import numpy as np
import numpy.typing as npt

import cells
import search as bench
from mindnet.search import Searcher, SearchTuning
from mindnet.store import ScoredPoint, lexical_query

Matrix = npt.NDArray[np.float32]
POOL = bench.POOL
FAMILY_OF = {"foam": "foam", "rust-de": "rust", "rust-en": "rust", "rust-mixed": "rust",
             "xquad-de": "xquad", "xquad-en": "xquad"}
"""Corpus -> family: a cell's `shipped` means come from the other families' chunks only."""
FAMILIES = "all"
"""`--families new`: only the second round (projection, offset, the Rocchio list fused beside dense)."""
MIN_CHUNKS = 50
"""Fewest chunks of a language for the store's own mean of it (else the shipped mean stands in)."""


@dataclasses.dataclass
class StoreView:
    """One store's chunks: ids, payloads, stored `use` vectors, languages, per-language means."""

    ids: list[str]
    payloads: list[dict[str, object]]
    vecs: Matrix
    langs: npt.NDArray[np.str_]
    means: dict[str, Matrix]
    counts: dict[str, int]


def load_store(searcher: Searcher) -> StoreView:
    points = list(searcher.store.scroll("chunks", with_vectors=True))
    vecs = np.asarray([p.vectors["use"] for p in points], dtype=np.float32)
    langs = np.asarray([str(p.payload.get("lang") or "") for p in points])
    means, counts = {}, {}
    for lang in sorted(set(langs.tolist())):
        rows = langs == lang
        means[lang] = vecs[rows].mean(axis=0)
        counts[lang] = int(rows.sum())
    return StoreView([p.id for p in points], [p.payload for p in points], vecs, langs, means, counts)


def pooled_means(views: Mapping[str, StoreView], family: str) -> dict[str, Matrix]:
    """Per-language means of every chunk of the corpora outside `family` (the mixed vault is a copy)."""
    sums: dict[str, Matrix] = {}
    counts: dict[str, int] = {}
    for corpus, v in views.items():
        if FAMILY_OF[corpus] == family or corpus == "rust-mixed":
            continue
        for lang in v.means:
            rows = v.langs == lang
            sums[lang] = sums.get(lang, 0) + v.vecs[rows].sum(axis=0)
            counts[lang] = counts.get(lang, 0) + int(rows.sum())
    return {lang: (sums[lang] / counts[lang]).astype(np.float32) for lang in sums}


def _unit(m: Matrix) -> Matrix:
    norm = np.linalg.norm(m, axis=-1, keepdims=True)
    return m / np.maximum(norm, 1e-9)


@dataclasses.dataclass
class Ctx:
    """What a candidate sees of one cell: the store, the query vector and language odds, the means."""

    view: StoreView
    shipped: dict[str, Matrix]
    cache: dict[str, Matrix]
    """Document matrices per candidate setting (computed once per store)."""

    def mean(self, lang: str, source: str) -> Matrix:
        if source == "store" and self.view.counts.get(lang, 0) >= MIN_CHUNKS:
            return self.view.means[lang]
        return self.shipped.get(lang, np.zeros(self.view.vecs.shape[1], dtype=np.float32))

    def query_mean(self, odds: Mapping[str, float], source: str) -> Matrix:
        total = sum(odds.values()) or 1.0
        return sum((p / total) * self.mean(lang, source) for lang, p in odds.items())  # type: ignore[return-value]


Ranker = Callable[[Matrix, Mapping[str, float], Ctx], tuple[npt.NDArray[np.int64], Matrix]]
"""(query vector, language odds, cell) -> chunk rows best first and their scores."""


def _top(scores: Matrix, n: int = POOL) -> tuple[npt.NDArray[np.int64], Matrix]:
    n = min(n, len(scores))
    part = np.argpartition(-scores, n - 1)[:n]
    order = part[np.argsort(-scores[part], kind="stable")]
    return order, scores[order]


def base(q: Matrix, odds: Mapping[str, float], c: Ctx) -> tuple[npt.NDArray[np.int64], Matrix]:
    return _top(c.view.vecs @ q)


def center(alpha: float, source: str) -> Ranker:
    def rank(q: Matrix, odds: Mapping[str, float], c: Ctx) -> tuple[npt.NDArray[np.int64], Matrix]:
        key = f"center {alpha} {source}"
        if key not in c.cache:
            m = np.stack([c.mean(lang, source) for lang in c.view.langs])
            c.cache[key] = _unit(c.view.vecs - alpha * m)
        return _top(c.cache[key] @ _unit(q - alpha * c.query_mean(odds, source)))
    return rank


def shift(alpha: float, source: str) -> Ranker:
    def rank(q: Matrix, odds: Mapping[str, float], c: Ctx) -> tuple[npt.NDArray[np.int64], Matrix]:
        mq = c.query_mean(odds, source)
        scores = np.empty(len(c.view.ids), dtype=np.float32)
        for lang in c.view.counts:
            rows = c.view.langs == lang
            scores[rows] = c.view.vecs[rows] @ _unit(q - alpha * mq + alpha * c.mean(lang, source))
        return _top(scores)
    return rank


def rocchio(beta: float, m: int, cross_only: bool, inner: Ranker = base) -> Ranker:
    def rank(q: Matrix, odds: Mapping[str, float], c: Ctx) -> tuple[npt.NDArray[np.int64], Matrix]:
        rows, scores = inner(q, odds, c)
        top = rows[:m]
        if cross_only:
            qlang = max(odds, key=lambda lang: odds[lang]) if odds else ""
            langs = c.view.langs[top].tolist()
            if max(set(langs), key=langs.count) == qlang:
                return rows, scores
        q2 = _unit(q + beta * _unit(c.view.vecs[top].mean(axis=0)))
        return _top(c.view.vecs @ q2)
    return rank


def language_axis(c: Ctx, source: str) -> Matrix | None:
    """unit(μ_de - μ_en): the direction that tells the two languages apart (None without both means)."""
    de, en = c.mean("de", source), c.mean("en", source)
    if not de.any() or not en.any():
        return None
    return _unit(de - en)


def project(alpha: float, source: str) -> Ranker:
    """Both sides lose α of their component on the language axis, then unit length: only the one
    direction that says "German or English" goes, the rest of the mean (shared by all text) stays."""
    def rank(q: Matrix, odds: Mapping[str, float], c: Ctx) -> tuple[npt.NDArray[np.int64], Matrix]:
        u = language_axis(c, source)
        if u is None:
            return base(q, odds, c)
        key = f"project {alpha} {source}"
        if key not in c.cache:
            c.cache[key] = _unit(c.view.vecs - alpha * np.outer(c.view.vecs @ u, u))
        return _top(c.cache[key] @ _unit(q - alpha * (q @ u) * u))
    return rank


def offset(alpha: float, source: str) -> Ranker:
    """cos(q, d) - α·q·μ(lang(d)): a per-language constant for each query, so the order within a
    language stays and only how the languages interleave changes (a no-op in a one-language store)."""
    def rank(q: Matrix, odds: Mapping[str, float], c: Ctx) -> tuple[npt.NDArray[np.int64], Matrix]:
        scores = c.view.vecs @ q
        for lang in c.view.counts:
            scores[c.view.langs == lang] -= alpha * float(q @ c.mean(lang, source))
        return _top(scores)
    return rank


def hub_scores(c: Ctx, kind: str, k: int = 10) -> Matrix:
    """How much of a hub each chunk is: its mean cosine to its k nearest other chunks (`knn`, CSLS's
    r_T, Conneau et al. 2018) or its cosine to the store's centroid (`centroid`)."""
    key = f"hub {kind} {k}"
    if key not in c.cache:
        v = c.view.vecs
        if kind == "centroid":
            c.cache[key] = v @ _unit(v.mean(axis=0))
        else:
            out = np.empty(len(v), dtype=np.float32)
            for start in range(0, len(v), 1024):
                sims = v[start:start + 1024] @ v.T
                part = -np.partition(-sims, k, axis=1)[:, 1:k + 1]  # the largest is the chunk itself
                out[start:start + 1024] = part.mean(axis=1)
            c.cache[key] = out
    return c.cache[key]


def csls(gamma: float, kind: str) -> Ranker:
    """cos(q, d) - γ · hubness(d): a chunk near everything (short, generic) wins many queries by
    proximity alone, and more so across languages, where every true match is farther away."""
    def rank(q: Matrix, odds: Mapping[str, float], c: Ctx) -> tuple[npt.NDArray[np.int64], Matrix]:
        return _top(c.view.vecs @ q - gamma * hub_scores(c, kind))
    return rank


_WORD = re.compile(r"\b\w{2,}\b")


def strip_stopwords(text: str, langs: Sequence[str]) -> str:
    """The query without the words that are a stopword in any of `langs` (Edge's BM25 lists): the
    question frame ("Wie kann ich", "how do I") is language-specific and says nothing of the topic."""
    def keep(m: re.Match[str]) -> str:
        return m.group(0) if all(lexical_query(m.group(0), (lang,)).indices for lang in langs) else ""

    kept = " ".join(_WORD.sub(keep, text).split())
    return kept if any(ch.isalnum() for ch in kept) else text


@dataclasses.dataclass(frozen=True)
class Requery:
    """The query embedded again from another text (`transform`) and searched with the plain vector `q`
    and the new one `a` (the store's dense list replaced).

    `cross` False: one search with unit(a + mix·q) for every chunk. True: per chunk language L, the
    vector unit(q + scale·(1 - P(query in L))·a), so a chunk in the question's own language meets the
    plain query and another language's chunk meets mostly its content words (one search per language)."""

    transform: Callable[[str, Sequence[str]], str]
    mix: float
    cross: bool = False
    extra: float = 0.0
    """> 0: fused beside the plain dense list at this weight (the e5 list's slot) instead of replacing it."""

    def rank(self, q: Matrix, a: Matrix, odds: Mapping[str, float],
             c: Ctx) -> tuple[npt.NDArray[np.int64], Matrix]:
        if not self.cross:
            return base(_unit(a + self.mix * q), odds, c)
        scores = np.empty(len(c.view.ids), dtype=np.float32)
        for lang in c.view.counts:
            rows = c.view.langs == lang
            scores[rows] = c.view.vecs[rows] @ _unit(q + self.mix * (1.0 - odds.get(lang, 0.0)) * a)
        return _top(scores)


@dataclasses.dataclass(frozen=True)
class Extra:
    """A candidate fused as an extra dense list (in the e5 list's slot) at `weight`, the dense list kept."""

    ranker: Ranker
    weight: float


def candidates() -> dict[str, dict[str, Ranker | Extra | Requery]]:
    """Family -> setting label -> ranker (replaces the dense list), `Extra` or `Requery`; `off` is the
    store's list."""
    fams: dict[str, dict[str, Ranker | Extra | Requery]] = {}
    if FAMILIES == "requery":
        fams["query without stopwords"] = {f"mix={m}": Requery(strip_stopwords, m) for m in (0.5, 1.0, 2.0)}
        fams["query without stopwords, other languages"] = {f"scale={m}": Requery(strip_stopwords, m, True)
                                                            for m in (0.5, 1.0, 2.0, 4.0)}
        fams["query without stopwords, beside dense"] = {f"mix={m} w={w}": Requery(strip_stopwords, m, extra=w)
                                                         for m in (0.0, 1.0) for w in (0.25, 0.5, 1.0)}
        return fams
    for source in ("store", "shipped"):
        fams[f"project ({source} axis)"] = {f"α={a}": project(a, source) for a in (0.5, 1.0)}
        fams[f"offset ({source} means)"] = {f"α={a}": offset(a, source) for a in (0.5, 1.0)}
    for kind in ("knn", "centroid"):
        fams[f"csls ({kind})"] = {f"γ={g}": csls(g, kind) for g in (0.1, 0.25, 0.5)}
    if FAMILIES == "hub":
        return fams
    fams["rocchio list"] = {f"β={b} m={m} w={w}": Extra(rocchio(b, m, False), w)
                            for b in (0.5, 1.0) for m in (3, 5) for w in (0.25, 0.5)}
    if FAMILIES == "new":
        return fams
    for source in ("store", "shipped"):
        fams[f"center ({source} means)"] = {f"α={a}": center(a, source) for a in (0.5, 1.0)}
        fams[f"shift ({source} means)"] = {f"α={a}": shift(a, source) for a in (0.5, 1.0)}
    for cross in (False, True):
        fams["rocchio" + (" cross" if cross else "")] = {
            f"β={b} m={m}": rocchio(b, m, cross) for b in (0.25, 0.5, 1.0) for m in (3, 5)}
    return fams


def dense_list(rows: npt.NDArray[np.int64], scores: Matrix, view: StoreView) -> list[ScoredPoint]:
    return [ScoredPoint(view.ids[i], float(s), view.payloads[i]) for i, s in zip(rows, scores, strict=True)]


def fetch_views(stack: contextlib.ExitStack, args: argparse.Namespace
                ) -> tuple[list[bench.CellLists], dict[str, str], dict[str, StoreView]]:
    """The cells' lists, each cell's corpus, and each corpus's stored vectors read once (cells share stores)."""
    fetched = bench.fetch_cells(stack, args)
    corpus_of = {s.name: s.corpus for s in cells.CELLS}
    views: dict[str, StoreView] = {}
    for c in fetched:
        views.setdefault(corpus_of[c.name], load_store(c.searcher))
    return fetched, corpus_of, views


def run(args: argparse.Namespace) -> None:
    """Fetch the cells, replay every candidate alone and fused, write the figures to `--out`."""
    args.e5, args.e5_fixed = False, False
    with contextlib.ExitStack() as stack:
        fetched, corpus_of, views = fetch_views(stack, args)
        singles = {c.name: bench.single_scores(c) for c in fetched}
        default = SearchTuning()
        fams = candidates()
        result: dict[str, dict[str, dict[str, dict[str, float]]]] = {"dense": {}, "fused": {}}
        for fam in fams:
            for kind in ("dense", "fused"):
                result[kind][fam] = {"off": {}}
        check: dict[str, float] = {}
        started = time.perf_counter()
        for c in fetched:
            corpus = corpus_of[c.name]
            ctx = Ctx(views[corpus], pooled_means(views, FAMILY_OF[corpus]), {})
            qvecs = [np.asarray(c.searcher.embedder.embed_query(q.query), dtype=np.float32) for q in c.real.queries]
            base_lists = [dense_list(*base(q, lists.query_langs, ctx), ctx.view)
                          for q, lists in zip(qvecs, c.real.lists, strict=True)]
            check[c.name] = statistics.mean(
                len({p.id for p in a[:50]} & {p.id for p in b.dense[:50]}) / max(1, len(b.dense[:50]))
                for a, b in zip(base_lists, c.real.lists, strict=True))
            off_dense = bench.replay(c.real, "dense", default)["all"].ndcg_5
            off_fused = bench.replay(c.real, "hybrid", default)["all"].ndcg_5
            for fam, settings in fams.items():
                result["dense"][fam]["off"][c.name] = off_dense
                result["fused"][fam]["off"][c.name] = off_fused
                for label, cand in settings.items():
                    if isinstance(cand, Requery):
                        again = [np.asarray(c.searcher.embedder.embed_query(
                            cand.transform(q.query, c.searcher.settings.languages)), dtype=np.float32)
                            for q in c.real.queries]
                        made = [dense_list(*cand.rank(q, a, lists.query_langs, ctx), ctx.view)
                                for a, q, lists in zip(again, qvecs, c.real.lists, strict=True)]
                    else:
                        ranker = cand.ranker if isinstance(cand, Extra) else cand
                        made = [dense_list(*ranker(q, lists.query_langs, ctx), ctx.view)
                                for q, lists in zip(qvecs, c.real.lists, strict=True)]
                    alone = dataclasses.replace(c.real, lists=[dataclasses.replace(lists, dense=d)
                                                               for d, lists in zip(made, c.real.lists, strict=True)])
                    tuning = default
                    weight = cand.weight if isinstance(cand, Extra) else cand.extra if isinstance(cand, Requery) else 0
                    if weight > 0:
                        fused = dataclasses.replace(c.real, lists=[
                            dataclasses.replace(lists, quality=d) for d, lists in zip(made, c.real.lists, strict=True)])
                        tuning = dataclasses.replace(default, e5_weight=weight, use_weight_with_e5=1.0)
                    else:
                        fused = alone
                    result["dense"][fam].setdefault(label, {})[c.name] = bench.replay(alone, "dense",
                                                                                      default)["all"].ndcg_5
                    result["fused"][fam].setdefault(label, {})[c.name] = bench.replay(fused, "hybrid",
                                                                                      tuning)["all"].ndcg_5
            print(f"  {c.name}: done at {time.perf_counter() - started:.0f}s (numpy top-50 = store's: "
                  f"{check[c.name]:.3f})", file=sys.stderr, flush=True)
    out = {"cells": [c.name for c in fetched], "sizes": {c.name: len(c.real.queries) for c in fetched},
           "singles": singles, "check": check, **result}
    Path(args.out).write_text(json.dumps(out, indent=1, ensure_ascii=False), encoding="utf-8")
    print_table([out])


LOO_CANDIDATES: dict[str, Callable[[], Ranker | Requery | None]] = {
    "off": lambda: None,
    "strip-other-1": lambda: Requery(strip_stopwords, 1.0, True),
    "strip-all-1": lambda: Requery(strip_stopwords, 1.0),
    "project-shipped-0.5": lambda: project(0.5, "shipped"),
}
"""`loo --candidate`: the dense lists replayed through all of `bench/search.py loo`'s fusion settings."""


def run_loo(args: argparse.Namespace) -> None:
    """`bench/search.py loo` (188 fusion settings, leave one cell out) with one candidate's dense list in
    place of the store's: `--out` is a `loo` result, so `bench/search.py loo-table` prints it, and the
    candidate's list is the `dense` single (it would be the product's)."""
    args.e5, args.e5_fixed = False, False
    cand = LOO_CANDIDATES[args.candidate]()
    with contextlib.ExitStack() as stack:
        fetched, corpus_of, views = fetch_views(stack, args)
        replaced = []
        for c in fetched:
            corpus = corpus_of[c.name]
            ctx = Ctx(views[corpus], pooled_means(views, FAMILY_OF[corpus]), {})
            if cand is not None:
                made = []
                for q, lists in zip(c.real.queries, c.real.lists, strict=True):
                    qv = np.asarray(c.searcher.embedder.embed_query(q.query), dtype=np.float32)
                    if isinstance(cand, Requery):
                        a = np.asarray(c.searcher.embedder.embed_query(
                            cand.transform(q.query, c.searcher.settings.languages)), dtype=np.float32)
                        rows, scores = cand.rank(qv, a, lists.query_langs, ctx)
                    else:
                        rows, scores = cand(qv, lists.query_langs, ctx)
                    made.append(dataclasses.replace(lists, dense=dense_list(rows, scores, ctx.view)))
                c = dataclasses.replace(c, real=dataclasses.replace(c.real, lists=made))
            replaced.append(c)
        result: dict[str, object] = {"cells": [c.name for c in replaced],
                                     "sizes": {c.name: len(c.real.queries) for c in replaced},
                                     "singles": {c.name: bench.single_scores(c) for c in replaced}}
        started = time.perf_counter()
        tunings = bench.loo_tunings()
        result["choices"] = {"hybrid": {bench._tuning_label(t): {
            c.name: bench.replay(c.real, "hybrid", t)["all"].ndcg_5 for c in replaced} for t in tunings}}
        print(f"  {len(tunings)} settings replayed in {time.perf_counter() - started:.0f}s", file=sys.stderr,
              flush=True)
        result["default"] = bench._tuning_label(SearchTuning())
        result["proposed"] = bench._tuning_label(bench.PROPOSED)
    Path(args.out).write_text(json.dumps(result, indent=1, ensure_ascii=False), encoding="utf-8")
    bench.print_tables([result])


def merge(results: Sequence[dict]) -> dict:  # type: ignore[type-arg]
    out: dict = {"cells": [], "sizes": {}, "singles": {}, "dense": {}, "fused": {}}  # type: ignore[type-arg]
    for r in results:
        out["cells"] += r["cells"]
        out["sizes"].update(r["sizes"])
        out["singles"].update(r["singles"])
        for kind in ("dense", "fused"):
            for fam, settings in r[kind].items():
                for label, per in settings.items():
                    out[kind].setdefault(fam, {}).setdefault(label, {}).update(per)
    return out


def print_table(results: Sequence[dict]) -> None:  # type: ignore[type-arg]
    r = merge(results)
    names, singles = r["cells"], r["singles"]
    refs = {n: max(singles[n][s] for s in bench.SINGLES) for n in names}
    for fam in r["dense"]:
        print(f"\n## {fam}\n")
        cols: dict[str, dict[str, float]] = {}
        picks: dict[str, dict[str, str]] = {}
        for kind in ("dense", "fused"):
            labels = list(r[kind][fam])
            scores = {i: r[kind][fam][lab] for i, lab in enumerate(labels)}
            held = cells.leave_one_out(scores, refs, names)
            cols[f"{kind} off"] = scores[0]
            cols[f"{kind} OOS"] = {n: held[n][1] for n in names}
            picks[kind] = {n: labels[held[n][0]] for n in names}
        print("| cell | n | best single | " + " | ".join(cols) + " | Δ dense | Δ fused | picks (dense / fused) |")
        print("|" + "---|" * (len(cols) + 6))
        for n in names:
            print(f"| {n} | {r['sizes'][n]} | {refs[n]:.3f} | " + " | ".join(f"{cols[k][n]:.3f}" for k in cols)
                  + f" | {cols['dense OOS'][n] - cols['dense off'][n]:+.3f}"
                  + f" | {cols['fused OOS'][n] - cols['fused off'][n]:+.3f}"
                  + f" | {picks['dense'][n]} / {picks['fused'][n]} |")
        print(f"| mean | | {statistics.mean(refs.values()):.3f} | "
              + " | ".join(f"{statistics.mean(cols[k][n] for n in names):.3f}" for k in cols)
              + f" | {statistics.mean(cols['dense OOS'][n] - cols['dense off'][n] for n in names):+.3f}"
              + f" | {statistics.mean(cols['fused OOS'][n] - cols['fused off'][n] for n in names):+.3f} | |")
        print("\nin sample, every setting (dense / fused), mean and each cell:\n")
        for label in r["dense"][fam]:
            d, f = r["dense"][fam][label], r["fused"][fam][label]
            print(f"  {label:>12}: {statistics.mean(d.values()):.3f} / {statistics.mean(f.values()):.3f}   "
                  + " ".join(f"{d[n]:.3f}/{f[n]:.3f}" for n in names))


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run")
    r.add_argument("--work", default="/tmp/mindnet-bench-loo")
    r.add_argument("--cells", default="")
    r.add_argument("--max-queries", type=int, default=100)
    r.add_argument("--out", required=True)
    r.add_argument("--families", choices=("all", "new", "hub", "requery"), default="all")
    lo = sub.add_parser("loo")
    lo.add_argument("--work", default="/tmp/mindnet-bench-loo")
    lo.add_argument("--cells", default="")
    lo.add_argument("--max-queries", type=int, default=100)
    lo.add_argument("--out", required=True)
    lo.add_argument("--candidate", choices=tuple(LOO_CANDIDATES), default="off")
    t = sub.add_parser("table")
    t.add_argument("files", nargs="+")
    args = p.parse_args(argv)
    if args.cmd == "run":
        global FAMILIES
        FAMILIES = args.families
        run(args)
    elif args.cmd == "loo":
        run_loo(args)
    else:
        print_table([json.loads(Path(f).read_text(encoding="utf-8")) for f in args.files])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
