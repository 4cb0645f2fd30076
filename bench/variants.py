"""Candidate single lists for `bench/search.py loo --variants` (issue 15, Build 3), computed in the bench.

Each candidate answers "would the list be better if a chunk were represented or scored another
way?" without re-importing: the chunks (payload and `use` vectors) and notes are read once from
the real store, and BM25 and cosine are recomputed here in numpy/dicts, per note:

* `bm25 (chunk, b=…)`: BM25 over the same chunk documents (title + section path + text) with
  another length normalisation: mindnet's chunks are short (median ~90 tokens against BM25's
  assumed 256), so with b=0.75 a 20-word chunk that repeats the note title wins over the section
  that explains the topic.
* `bm25 (note)`: one BM25 document per note (title, aliases, full text): how fixed 300-token
  windows behave on short documentation notes, with the title counted once.
* `bm25 (chunk, no title)`: the chunk text alone, to see what the repeated title does.
* `bm25 (chunk ± neighbours N)`: a chunk's document is its own text and its note's chunks next to it, nearest
  first, up to N tokens (`token_count`), with the title and section path: a window around every chunk, so a
  question whose words are spread over a short note's small sections finds them together (issue 25's chunk
  BM25 against fixed 300-token windows), while the hit is still the chunk in the middle.
* `dense (note mean)`: cosine to the normalised mean of a note's chunk vectors (free: no model call).
* `dense (max + sum)`: a note scores its best chunk's cosine plus a share of its others'.
* `title/alias`: notes whose title or an alias occurs in the query, by the share of its words.
* `dense (ctx …)`: other stored vectors, made from each chunk's own vector (`raw_vectors`) and its
  H2 section, note or neighbours; `ctx section 0.25` is the import's default, `note K=…` its opt-in
  `dense_note_tokens` (`points.contextual_vectors`).

The BM25 here reproduces the engine's: Edge's `Bm25` document weights (k=1.2, b, avg_len) and the
IDF modifier `ln(1 + (N - n + 0.5) / (n + 0.5))` over the documents of the list.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
import qdrant_edge as qe

from mindnet.chunking.base import Chunk
from mindnet.points import contextual_vectors, stored_embedding_input
from mindnet.search import Searcher
from mindnet.store import lexical_query
from mindnet.titles import TitleIndex


def _encoder(lang: str | None, b: float, avg_len: float) -> qe.Bm25:
    kwargs: dict[str, object] = {"b": b, "avg_len": avg_len}
    if lang:
        try:
            return qe.Bm25(qe.Bm25Config(language=lang, **kwargs))
        except ValueError:
            pass
    return qe.Bm25(qe.Bm25Config(stemmer=qe.DisabledStemmer(), stopwords=qe.StopwordsSet(), **kwargs))


class Bm25Index:
    """BM25 over (key, lang, text) documents, engine-compatible, searched with `lexical_query` terms."""

    def __init__(self, docs: Sequence[tuple[str, str | None, str]], *, b: float = 0.75, avg_len: float = 256.0) -> None:
        self.keys = [k for k, _, _ in docs]
        encoders: dict[str | None, qe.Bm25] = {}
        postings: dict[int, list[tuple[int, float]]] = {}
        for i, (_, lang, text) in enumerate(docs):
            enc = encoders.get(lang) or encoders.setdefault(lang, _encoder(lang, b, avg_len))
            vec = enc.embed_document(text)
            for index, value in zip(vec.indices, vec.values, strict=True):
                postings.setdefault(index, []).append((i, value))
        self._finish(len(docs), postings)

    def _finish(self, n: int, postings: dict[int, list[tuple[int, float]]]) -> None:
        self.idf = {t: math.log(1 + (n - len(p) + 0.5) / (len(p) + 0.5)) for t, p in postings.items()}
        self.postings = postings

    @classmethod
    def from_vectors(cls, keys: Sequence[str], vectors: Sequence[Mapping[int, float]]) -> Bm25Index:
        """An index over ready-made document vectors (term -> BM25 tf weight), e.g. chunk + context sums."""
        self = cls.__new__(cls)
        self.keys = list(keys)
        postings: dict[int, list[tuple[int, float]]] = {}
        for i, vec in enumerate(vectors):
            for t, w in vec.items():
                postings.setdefault(t, []).append((i, w))
        self._finish(len(keys), postings)
        return self

    def search(self, query: str, languages: Sequence[str], *, strict: bool = False) -> list[tuple[str, float]]:
        scores: dict[int, float] = {}
        for t in lexical_query(query, languages, strict=strict).indices:
            idf = self.idf.get(t)
            if idf is None:
                continue
            for i, w in self.postings[t]:
                scores[i] = scores.get(i, 0.0) + idf * w
        return [(self.keys[i], s) for i, s in sorted(scores.items(), key=lambda kv: -kv[1])]


@dataclass
class CorpusView:
    """What the variants need of one store: chunks with vectors, notes with titles and aliases."""

    chunk_ids: list[str]
    chunk_note: list[str]
    vectors: npt.NDArray[np.float32]
    note_ids: list[str]
    note_vectors: npt.NDArray[np.float32]
    note_of_row: npt.NDArray[np.int64]
    """Row of `note_ids` for each chunk."""
    indexes: dict[str, Bm25Index]
    titles: TitleIndex
    """Every note's title and aliases (the product's `mindnet.titles` index)."""
    languages: tuple[str, ...]
    paths: dict[str, str]
    """Note id -> vault-relative path (BEIR cells judge by path)."""
    context: dict[str, npt.NDArray[np.float32]]
    """Context-mixed chunk vectors by `scope α` (`context_vectors`)."""


def load_view(searcher: Searcher) -> CorpusView:
    store = searcher.store
    # a chunk whose retrieval text is empty (link reference definitions only) has no vector and no BM25 document
    chunks = [p for p in store.scroll("chunks", with_vectors=True) if "use" in p.vectors]
    notes = {p.id: p.payload for p in store.scroll("notes", fields=["title", "aliases", "lang", "fulltext", "path"])}
    ids = [p.id for p in chunks]
    note_of = [str(p.payload.get("note_id")) for p in chunks]
    vecs = np.asarray([p.vectors["use"] for p in chunks], dtype=np.float32)
    note_ids = sorted(set(note_of))
    row = {n: i for i, n in enumerate(note_ids)}
    note_of_row = np.asarray([row[n] for n in note_of], dtype=np.int64)
    sums = np.zeros((len(note_ids), vecs.shape[1]), dtype=np.float32)
    np.add.at(sums, note_of_row, vecs)
    sums /= np.maximum(np.linalg.norm(sums, axis=1, keepdims=True), 1e-9)

    def chunk_doc(p: object, title: bool) -> str:
        pl = p.payload  # type: ignore[attr-defined]
        parts = [str(pl.get("note_title", "")), str(pl.get("section_path", "")).replace("/", " ")] if title else []
        return "\n".join([*parts, str(pl.get("text", ""))])

    def aliases(nid: str) -> list[str]:
        return [str(a) for a in notes.get(nid, {}).get("aliases") or []]

    chunk_docs = [(p.id, p.payload.get("lang"), chunk_doc(p, True)) for p in chunks]
    note_docs = [(nid, notes.get(nid, {}).get("lang"),
                  "\n".join([str(notes.get(nid, {}).get("title", "")), *aliases(nid),
                             str(notes.get(nid, {}).get("fulltext", ""))])) for nid in note_ids]
    sections: dict[tuple[str, str], list[object]] = {}
    for p in chunks:
        top = "/".join(str(p.payload.get("section_path", "/")).split("/")[:2])  # the H2 a chunk is under
        sections.setdefault((str(p.payload.get("note_id")), top), []).append(p)
    section_docs = [(f"{nid}\x00{sec}", group[0].payload.get("lang"),  # type: ignore[attr-defined]
                     "\n".join([str(notes.get(nid, {}).get("title", "")), sec.replace("/", " "),
                                 *(str(g.payload.get("text", "")) for g in group)]))  # type: ignore[attr-defined]
                    for (nid, sec), group in sections.items()]
    with_aliases = [(p.id, p.payload.get("lang"),
                     "\n".join([*aliases(str(p.payload.get("note_id"))), chunk_doc(p, True)])) for p in chunks]
    encoders: dict[str | None, qe.Bm25] = {}

    def sparse(lang: str | None, text: str) -> dict[int, float]:
        enc = encoders.get(lang) or encoders.setdefault(lang, _encoder(lang, 0.75, 256.0))
        v = enc.embed_document(text)
        return dict(zip(v.indices, v.values, strict=True))

    section_of = {p.id: (str(p.payload.get("note_id")),
                         "/".join(str(p.payload.get("section_path", "/")).split("/")[:2])) for p in chunks}
    section_vec = {(nid, sec): sparse(group[0].payload.get("lang"), "\n".join(  # type: ignore[attr-defined]
        str(g.payload.get("text", "")) for g in group)) for (nid, sec), group in sections.items()}  # type: ignore[attr-defined]
    chunk_vec = [sparse(lang, text) for _, lang, text in chunk_docs]
    ctx_indexes = {}
    for beta in CONTEXT_BETAS:
        mixed = []
        for p, own in zip(chunks, chunk_vec, strict=True):
            v = dict(own)
            for t, w in section_vec[section_of[p.id]].items():
                v[t] = v.get(t, 0.0) + beta * w
            mixed.append(v)
        ctx_indexes[f"chunk + {beta} section"] = Bm25Index.from_vectors(ids, mixed)
    indexes = {
        **ctx_indexes,
        **{f"chunk ± neighbours {n}": Bm25Index(neighbour_docs(chunks, n)) for n in NEIGHBOUR_TOKENS},
        "chunk b=0.75": Bm25Index(chunk_docs),
        "chunk + aliases": Bm25Index(with_aliases),
        "section": Bm25Index(section_docs),
        "chunk b=0.3": Bm25Index(chunk_docs, b=0.3),
        "chunk no title": Bm25Index([(p.id, p.payload.get("lang"), chunk_doc(p, False)) for p in chunks]),
        "note": Bm25Index(note_docs, avg_len=float(np.mean([len(d[2].split()) for d in note_docs]) or 1.0)),
    }
    titles = TitleIndex((nid, name) for nid in note_ids
                        for name in [str(notes.get(nid, {}).get("title", "")), *aliases(nid)])
    ctx = context_vectors(chunks, raw_vectors(searcher, chunks), section_of)
    return CorpusView(ids, note_of, vecs, note_ids, sums, note_of_row, indexes, titles,
                      tuple(searcher.settings.languages), {n: str(notes.get(n, {}).get("path", "")) for n in note_ids},
                      ctx)


NEIGHBOUR_TOKENS = (150, 300)
"""Token budgets of the `bm25 (chunk ± neighbours N)` documents (300: the fixed windows' size)."""


def neighbour_docs(chunks: Sequence[object], budget: int) -> list[tuple[str, str | None, str]]:
    """(chunk id, lang, document) of each chunk: its text, then its note's neighbouring chunks nearest first
    (left before right at equal distance) while their `token_count`s fit `budget`; title and section path lead."""
    by_note: dict[str, list[object]] = {}
    for p in chunks:
        by_note.setdefault(str(p.payload.get("note_id")), []).append(p)  # type: ignore[attr-defined]
    out: dict[str, tuple[str, str | None, str]] = {}
    for group in by_note.values():
        group.sort(key=lambda p: int(p.payload.get("char_start") or 0))  # type: ignore[attr-defined]
        sizes = [max(1, int(p.payload.get("token_count") or 1)) for p in group]  # type: ignore[attr-defined]
        for i, p in enumerate(group):
            lo = hi = i
            used = sizes[i]
            while True:
                grown = False
                for j in (lo - 1, hi + 1):
                    if 0 <= j < len(group) and used + sizes[j] <= budget:
                        used += sizes[j]
                        lo, hi = min(lo, j), max(hi, j)
                        grown = True
                if not grown:
                    break
            pl = p.payload  # type: ignore[attr-defined]
            texts = [str(g.payload.get("text", "")) for g in group[lo:hi + 1]]  # type: ignore[attr-defined]
            head = [str(pl.get("note_title", "")), str(pl.get("section_path", "")).replace("/", " ")]
            out[p.id] = (p.id, pl.get("lang"), "\n".join([*head, *texts]))  # type: ignore[attr-defined]
    return [out[p.id] for p in chunks]  # type: ignore[attr-defined]


CONTEXT_ALPHAS = (0.25, 0.5, 1.0)
"""Weights of the context mean added to a chunk's own vector (`dense (ctx <scope> α)` variants)."""
CONTEXT_TOKENS = (25, 40, 60, 100, 150)
"""K of the product's length-weighted note context (`dense (ctx note K=…)`, `Settings.dense_note_tokens`)."""
CONTEXT_BETAS = (0.5, 1.0)
"""Weights of the H2 section's BM25 document added to a chunk's own (`bm25 (chunk + β section)`)."""


def _unit(m: npt.NDArray[np.float32]) -> npt.NDArray[np.float32]:
    return m / np.maximum(np.linalg.norm(m, axis=1, keepdims=True), 1e-9)


def raw_vectors(searcher: Searcher, chunks: Sequence[object]) -> npt.NDArray[np.float32]:
    """Each chunk's own `use` vector, before the import mixed its context in.

    The store holds the mixed vectors only, so the model input is rebuilt from the payload
    (`stored_embedding_input`: title, section, text; embedded `![[…]]` text is not in the payload
    and is left out) and asked of the searcher's embedder, whose cache (`use-cache.sqlite` under
    `loo --work`) already holds every chunk text the import embedded: no model call in practice.
    """
    texts = [stored_embedding_input(p.payload, searcher.settings) for p in chunks]  # type: ignore[attr-defined]
    return np.asarray(searcher.embedder.embed_passages(texts), dtype=np.float32)


def context_vectors(chunks: Sequence[object], vecs: npt.NDArray[np.float32],
                    section_of: Mapping[str, tuple[str, str]]) -> dict[str, npt.NDArray[np.float32]]:
    """Raw chunk vectors mixed with their context, each a candidate for the stored vector.

    `<scope> α`: unit(v + α · unit(mean of the scope's vectors)), scopes the chunk's H2 section,
    its whole note, and its neighbours (previous, itself, next) in reading order. `note K=…`: the
    product's opt-in mix (`points.contextual_vectors`), the note's mean weighted K / (chunk tokens),
    alone and beside the default section mix.
    No model call: the context comes from the chunks' own vectors.
    """
    ids = [p.id for p in chunks]  # type: ignore[attr-defined]
    order = sorted(range(len(ids)), key=lambda i: (section_of[ids[i]][0],
                                                   int(chunks[i].payload.get("char_start", 0))))  # type: ignore[attr-defined]
    groups: dict[str, dict[object, list[int]]] = {"section": {}, "note": {}}
    for i in range(len(ids)):
        groups["section"].setdefault(section_of[ids[i]], []).append(i)
        groups["note"].setdefault(section_of[ids[i]][0], []).append(i)
    means: dict[str, npt.NDArray[np.float32]] = {}
    for scope, grouped in groups.items():
        m = np.zeros_like(vecs)
        for members in grouped.values():
            m[members] = vecs[members].mean(axis=0)
        means[scope] = _unit(m)
    m = vecs.copy()
    for pos, i in enumerate(order):
        for j in (order[pos - 1] if pos else None, order[pos + 1] if pos + 1 < len(order) else None):
            if j is not None and section_of[ids[j]][0] == section_of[ids[i]][0]:
                m[i] += vecs[j]
    means["neighbours"] = _unit(m)
    out = {f"{scope} {a}": _unit(vecs + a * mean) for scope, mean in means.items() for a in CONTEXT_ALPHAS}
    records = [_chunk_record(p.payload) for p in chunks]  # type: ignore[attr-defined]
    for k in CONTEXT_TOKENS:
        out[f"note K={k}"] = np.asarray(contextual_vectors(records, vecs.tolist(), 0.0, float(k)), dtype=np.float32)
        out[f"section 0.25 + note K={k}"] = np.asarray(contextual_vectors(records, vecs.tolist(), 0.25, float(k)),
                                                       dtype=np.float32)
    return out


def _chunk_record(payload: Mapping[str, object]) -> Chunk:
    """The `Chunk` a stored payload was made from (`points.chunk_payload` holds every field)."""
    return Chunk(**{f.name: payload.get(f.name) for f in dataclasses.fields(Chunk)})  # type: ignore[arg-type]


def notes_from_chunks(ranked: Iterable[tuple[str, float]], note_of: Mapping[str, str],
                      sum_weight: float = 0.0) -> list[str]:
    """Note ids by best chunk score (+ `sum_weight` x the others'), best first."""
    best: dict[str, float] = {}
    rest: dict[str, float] = {}
    for cid, s in ranked:
        n = note_of[cid]
        if n in best:
            rest[n] = rest.get(n, 0.0) + s
        else:
            best[n] = s
    return sorted(best, key=lambda n: -(best[n] + sum_weight * rest.get(n, 0.0)))


def title_list(query: str, view: CorpusView) -> list[str]:
    """Notes whose title or an alias occurs in the query as whole words, longest name first."""
    return view.titles.matches(query)


def variant_lists(query: str, qvec: npt.NDArray[np.float32], view: CorpusView) -> dict[str, list[str]]:
    """Every candidate single list for one query, as note ids best first (top 50)."""
    note_of = dict(zip(view.chunk_ids, view.chunk_note, strict=True))
    out: dict[str, list[str]] = {}
    for name, index in view.indexes.items():
        hits = index.search(query, view.languages)
        if name == "note":
            ranked_notes = [k for k, _ in hits]
        elif name == "section":
            ranked_notes = list(dict.fromkeys(k.split("\x00")[0] for k, _ in hits))
        else:
            ranked_notes = notes_from_chunks(hits, note_of)
        out[f"bm25 ({name})"] = ranked_notes[:50]
    cos = view.vectors @ qvec
    order = np.argsort(-cos)[:400]
    ranked = [(view.chunk_ids[i], float(cos[i])) for i in order]
    out["dense (chunk max)"] = notes_from_chunks(ranked, note_of)[:50]
    out["dense (max + 0.1 sum)"] = notes_from_chunks(ranked[:150], note_of, 0.1)[:50]
    ncos = view.note_vectors @ qvec
    out["dense (note mean)"] = [view.note_ids[i] for i in np.argsort(-ncos)[:50]]
    best = np.full(len(view.note_ids), -1.0, dtype=np.float32)
    np.maximum.at(best, view.note_of_row, cos)
    out["dense (max + note mean)"] = [view.note_ids[i] for i in np.argsort(-(best + ncos))[:50]]
    out["title/alias"] = title_list(query, view)
    for name, mixed in view.context.items():
        c = mixed @ qvec
        top = np.argsort(-c)[:400]
        out[f"dense (ctx {name})"] = notes_from_chunks([(view.chunk_ids[i], float(c[i])) for i in top], note_of)[:50]
    return out


def rrf_notes(lists: Sequence[tuple[Sequence[str], float]], k: int) -> list[str]:
    """Weighted RRF over note lists."""
    scores: dict[str, float] = {}
    for ranked, w in lists:
        for r, n in enumerate(ranked, 1):
            scores[n] = scores.get(n, 0.0) + w / (k + r)
    return sorted(scores, key=lambda n: -scores[n])


__all__ = ["Bm25Index", "CorpusView", "load_view", "notes_from_chunks", "rrf_notes", "title_list", "variant_lists"]
