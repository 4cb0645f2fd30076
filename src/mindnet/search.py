"""The retrieval stage (R22, R23): dense, lexical and hybrid search, graph expansion, LLM context.

`Searcher` asks the store for chunks and turns what it finds into `Hit` records that carry
everything a citation needs (note, section, span, lines). Three modes:

* `dense`: cosine over the chunk vector `use`.
* `lexical`: BM25 over the sparse vector `bm25`; the query is tokenised under every configured
  language (`store.lexical_query`) because a query's language is only a guess.
* `hybrid` (default): the lists fused with Reciprocal Rank Fusion **in Python, by language**.
  BM25 only matches words, so for a German query against an English chunk the lexical list holds
  mostly accidental matches (names, numbers, stems that happen to collide) and pulls good dense
  hits down. A lexical rank counts `other + (same - other) * P(query is in the chunk's language)`
  (`SearchTuning`: same 1.5, other 0.25, rrf_k 5), the probability from the language model, so a
  short keyword or syntax query whose language is a coin toss keeps its exact matches. With
  `by_note` a note also gains 0.05 x the scores of its other chunks. Chosen by `bench/search.py
  grid` for the best worst-case nDCG@5 margin over BM25 alone and dense alone across all seven
  categories of both golden sets. `language_fusion=False` uses the engine's RRF instead.

  A fourth list closes the gap the language weights leave: **pseudo-relevance feedback**. The
  words of the first-pass top 5 chunks (`feedback_query`, each chunk encoded in its own language)
  are searched with BM25 once more and that list is fused with weight 0.25 (`feedback_weight`).
  It gives a German question on English notes lexical evidence in the notes' language, where the
  plain lexical list has none; before it, hybrid only tied dense on foam-docs' German questions
  (0.719 = 0.719 nDCG@5), now 0.754. foam-docs nDCG@5: hybrid 0.854, BM25 0.704, dense 0.729
  (0.849 without feedback, 0.830 with the k=10/same=1 default before that); rustbook-de 0.935
  (0.930 without feedback). It costs one sparse store query per hybrid search.

When the store holds the quality tier (the `e5` vector, multilingual-e5-small, filled after the
import) and the e5 model can be loaded, hybrid adds a third list: dense search on `e5` with the
e5 query vector, fused with weight `SearchTuning.e5_weight` (and `use_weight_with_e5` for the
`use` list). Chunks still lacking `e5` are simply absent from that list, so a half-filled tier
is correct by construction; a store without it searches exactly as before. See `e5_weight` for
the measurement behind the weights.

Graph expansion (`expand=True`) adds the prev/next chunks of the top hits and the best chunk (by
the query's dense score) of every note linked from or to a top note, each scored below the hit
that led to it (`adjacent_decay`, `link_decay`), so expansion never reorders what search found.
It is off by default: per-note nDCG is unchanged on every set measured (it only adds context
around hits), and re-ranking by links (`link_boost`) lowered nDCG@10 (foam-docs 0.834 -> 0.772
at 0.3). Use it to give an LLM the surroundings of a hit.

`build_context` merges the hits of one note that overlap or touch (exactly, on the note's
`fulltext`), orders them by note and position and fits them into a token budget with a
citation list (R23).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Literal, Protocol, TypeAlias

from .config import Settings
from .embedding import Embedder
from .errors import MindnetError
from .graph import STRUCTURAL_KINDS
from .points import DENSE_VECTOR, E5_VECTOR
from .store import (
    AnyOf,
    Condition,
    Equals,
    Filter,
    Prefix,
    Range,
    ScoredPoint,
    SparseVec,
    Store,
    lexical_document,
    lexical_query,
)
from .vault import language_identifier

Mode: TypeAlias = Literal["hybrid", "dense", "lexical"]
MODES: tuple[Mode, ...] = ("hybrid", "dense", "lexical")



# ---------------------------------------------------------------------------------------------
# Records
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class SearchFilters:
    """What a result must satisfy (R22); every given field must hold, empty fields are ignored."""

    type: tuple[str, ...] = ()
    """Note types; a chunk of any of them matches."""
    tags: tuple[str, ...] = ()
    """Tags that must *all* be on the note: adding a tag narrows the search, as in Obsidian."""
    area: str | None = None
    project: str | None = None
    lang: str | None = None
    """Chunk language (ISO 639-1), detected per chunk (R6)."""
    path_prefix: str | None = None
    """Vault-relative path prefix such as `projects/` (a folder) or `daily/2024-`."""
    note_id: tuple[str, ...] = ()
    """Restrict to these notes."""
    created_from: str | None = None
    """ISO 8601 date or datetime; notes created on or after it."""
    created_to: str | None = None
    """ISO 8601 date or datetime; notes created on or before it (a bare date includes that whole day)."""

    def to_filter(self) -> Filter | None:
        """The store's neutral `Filter`, or None when nothing is restricted."""
        must: list[Condition] = []
        if self.type:
            must.append(AnyOf("type", tuple(self.type)))
        must.extend(Equals("tags", tag) for tag in self.tags)
        for name in ("area", "project", "lang"):
            value = getattr(self, name)
            if value:
                must.append(Equals(name, value))
        if self.path_prefix:
            must.append(Prefix("path", self.path_prefix))
        if self.note_id:
            must.append(AnyOf("note_id", tuple(self.note_id)))
        if self.created_from or self.created_to:
            upper = self.created_to
            if upper and len(upper) == 10:  # a bare date: the whole day counts
                upper = f"{upper}T23:59:59.999999Z"
            lower = self.created_from
            if lower and len(lower) == 10:
                lower = f"{lower}T00:00:00Z"
            must.append(Range("created_at", gte=lower, lte=upper))
        return Filter(must=tuple(must)) if must else None


@dataclass(frozen=True, slots=True)
class Hit:
    """One search result: a chunk (or, with `by_note`, the best chunk of a note) and its citation data."""

    rank: int
    """1-based position in the result list."""
    score: float
    """Cosine (dense), BM25 (lexical) or RRF score (hybrid); expanded hits get a decayed score of the
    hit that led to them. Comparable only within one result list."""
    note_id: str
    path: str
    """Vault-relative path of the note."""
    title: str
    """Note title."""
    chunk_id: str
    section_path: str
    """`/H2/H3`, `/` before the first H2 (R7)."""
    section_title: str
    text: str
    """Chunk text (normalised, R5)."""
    char_start: int
    """Span in the note's `fulltext` (R11): what a citation quotes."""
    char_end: int
    line_start: int
    """1-based file lines of the span."""
    line_end: int
    lang: str
    via: str
    """How it was found: the lists that held it joined by `+` in the order `dense`, `e5`, `lexical`,
    `feedback` (e.g. `dense+lexical`, `dense+e5+lexical+feedback`), or `expand` (graph expansion)."""


@dataclass(frozen=True, slots=True)
class SearchTuning:
    """Knobs of fusion and expansion; the defaults are what `bench/search.py` measured best."""

    rrf_k: int = 5
    """RRF constant: small, so the top of each list counts far more than its tail. Chosen with the
    other fusion knobs by `bench/search.py grid` (5, 10, 20, 40, 60 tried): see `lexical_weight_same`."""
    candidates: int = 50
    """Candidates per list before fusion (at least `4 * k` are taken)."""
    lexical_weight_same: float = 1.5
    """Weight of a lexical rank when the chunk is in the query's language: above 1, because an
    exact word match in the reader's language is the strongest evidence a keyword or syntax
    query has (foam-docs keyword: BM25 alone 0.961 nDCG@5, dense 0.802). The grid (1440 settings,
    rrf_k x weights x confidence x title boost x note sum) kept the settings whose worst nDCG@5
    margin over the better baseline, across all 7 categories of foam-docs and rustbook-de, is
    highest, and among those the best mean: rrf_k=5, 1.5, 0.25, confidence on, no title boost,
    note sum 0.05."""
    lexical_weight_other: float = 0.25
    """Weight of a lexical rank when the chunk is in another language (see module docstring)."""
    language_confidence: bool = True
    """Weigh by how sure the language guess is: a chunk in language L gets
    `other + (same - other) * P(query is L)`. A short keyword or syntax query ("GistPad",
    `foam mcp --allow-writes`) is a coin toss for the language model, and a hard guess would
    down-weight exactly the lexical matches such a query relies on. False: the hard guess."""
    title_boost: float = 0.0
    """When > 0, a chunk gains `title_boost * share of its note title's words found in the query /
    (rrf_k + 1)`: a title match as a third, small RRF-like signal (hybrid only)."""
    note_sum_weight: float = 0.05
    """With `by_note`, a note scores its best chunk plus this times the sum of its other chunks'
    scores among the candidates: a note matching in several places ranks above a one-off match."""
    e5_weight: float = 1.0
    """Weight of a rank in the `e5` list (quality tier) in hybrid fusion; 0 leaves the list out
    (and skips the e5 query embedding). Only used when the store holds `e5` vectors.

    Chosen by `bench/search.py grid --e5` (234 settings: e5 0-3 x use 0.5/1 x rrf_k x lexical
    weights, the feedback list on) by the worst nDCG@5 margin over the best single list (BM25,
    dense `use`, dense `e5`) across all 7 categories of foam-docs and rustbook-de, then the mean,
    with the lexical knobs of the default kept (they serve stores without e5): 1.0 has the best
    worst margin (-0.004, rustbook syntax vs e5 alone; -0.006 at 0.5 and 0.75, where rustbook
    keyword stays below e5 alone) and lifts nDCG@5 on foam-docs 0.854 -> 0.860 and on rustbook-de
    0.935 -> 0.944. Weight 0.5 is better on German questions (0.782 against 0.720) but not by the
    rule. With other lexical knobs (k=10, same 1.0, other 0.1, e5 0.5) the worst margin is -0.001
    (foam-docs 0.862, rustbook-de 0.959); left as a measured option, not a second default."""
    use_weight_with_e5: float = 1.0
    """Weight of a rank in the `use` list when the `e5` list takes part (1.0 without it)."""
    feedback_weight: float = 0.25
    """Weight of a rank in the feedback list (pseudo-relevance feedback, hybrid only); 0 leaves it
    out and saves its store query.

    The feedback list is BM25 over the words of the first-pass top chunks (`feedback_query`): it
    gives the lexical side the *corpus's* words for the question. For a German question on English
    notes the plain lexical list is empty or accidental (foam-docs multilingual: BM25 alone 0.193
    nDCG@5) and language-aware RRF rightly mutes it, so hybrid was dense alone there (0.719 =
    0.719); the feedback list, in the notes' own language, lifts notes that share the top hits'
    vocabulary (a second recipe on pasting images, the block-anchor note beside the embeds note).
    One weight whatever the language: its words come from the chunks, not from the query.

    Chosen by `bench/search.py grid` (feedback weight 0/0.5/1 crossed with every lexical knob, and
    weight 0.25-1.5 x docs 1-5 x terms 10-40 at the lexical defaults; the same run measures the
    baselines). Every feedback shape at the default lexical knobs lifts the worst nDCG@5 margin over
    the better of BM25 alone and dense alone, across the 7 categories of foam-docs and rustbook-de,
    from 0.000 (foam multilingual) to +0.007..+0.014, so the list itself is no lucky setting. The
    weights from 0.5 up often pay for it on foam conceptual (up to -0.05). The rule: the best worst
    margin among settings that leave no category more than 0.005 below the fusion without
    feedback, then the best mean: weight 0.25, 5 docs x 20 terms (every category within 0.003),
    worst margin +0.009 (foam keyword), foam multilingual 0.719 -> 0.754, foam-docs 0.849 -> 0.854,
    rustbook-de 0.930 -> 0.935. (The leximin top of the whole grid, k=40 with
    same=3 and feedback 0.5, is +0.018 but costs rustbook-de 0.930 -> 0.897.) Feedback from the
    dense list alone instead of the fused first pass lowered foam keyword below BM25 alone. The e5
    weight was chosen again with this list on (`e5_weight`)."""
    feedback_docs: int = 5
    """First-pass top chunks whose words make the feedback query, the chunk at rank r counting 1/r
    (see `feedback_weight`: 2, 3 and 5 docs measured alike at weight 0.25)."""
    feedback_terms: int = 20
    """Heaviest terms kept in the feedback query: enough to describe the topic, few enough to keep
    the extra store query cheap (one sparse search of 20 weighted terms)."""
    language_fusion: bool = True
    """False fuses inside the engine (`store.search_hybrid`, plain RRF of `use` and BM25 only,
    one round trip)."""
    expand_top: int = 5
    """How many top hits (chunks) and top notes are expanded."""
    adjacent_decay: float = 0.5
    """Score of a prev/next neighbour relative to its hit."""
    link_decay: float = 0.7
    """Score of a linked note's best chunk relative to the linking hit (times its relative cosine)."""
    max_linked_notes: int = 20
    """Linked notes considered per query: a hub note linking hundreds must not flood the results."""
    link_boost: float = 0.0
    """When > 0, chunks already found whose note is linked from or to a top note gain
    `link_boost * score(linking hit) * relative cosine`: a re-ranking by the graph, off by default."""


@dataclass(slots=True)
class _Cand:
    """A chunk under consideration, before ranks are assigned."""

    chunk_id: str
    score: float
    payload: dict[str, Any]
    via: str
    dense: float | None = None
    """Cosine to the query when known (dense list or linked-note search)."""


# ---------------------------------------------------------------------------------------------
# Search
# ---------------------------------------------------------------------------------------------


class Searcher:
    """Search over one store with one embedder; cheap to create, no state between queries but the
    quality-tier model, loaded once on first use."""

    def __init__(self, store: Store, embedder: Embedder, settings: Settings, *,
                 tuning: SearchTuning | None = None, dense_vector: str = DENSE_VECTOR,
                 quality: Embedder | Callable[[], Embedder | None] | None = None) -> None:
        """Bind the parts a search needs; every model arrives from its owner (`api.Index`).

        Args:
            store: an opened store (`ensure` called) holding chunks, notes and edges.
            embedder: the model that embedded the chunks (the store records its id).
            settings: `languages` decides query tokenisation and language detection.
            tuning: fusion and expansion knobs; defaults as measured.
            dense_vector: the named dense vector to search.
            quality: the model of the `e5` vector for hybrid's third list, or a function giving
                it, called (once) on the first search that fuses the list, so the model loads only
                when the store has e5 vectors; None never uses the tier. A model whose id differs
                from the store's is ignored: its vectors would not be comparable.
        """
        self.store = store
        self.embedder = embedder
        self.settings = settings
        self.tuning = tuning or SearchTuning()
        self.dense_vector = dense_vector
        self._quality: Embedder | None = quality if isinstance(quality, Embedder) else None
        self._provide: Callable[[], Embedder | None] | None = None if isinstance(quality, Embedder) else quality
        """Still to be asked for the model; None once asked, or when a model was given."""

    def quality_embedder(self) -> Embedder | None:
        """The embedder for the store's `e5` vectors, or None when the tier cannot take part.

        Checked per call (the store's meta is cached, so this is cheap): a background import may
        add the tier while a long-lived searcher (the API) is open. The provider is asked at most
        once per searcher.
        """
        schema = self.store.meta()
        spec = next((v for v in schema.vectors if v.name == E5_VECTOR), None) if schema else None
        if spec is None:
            return None
        if self._quality is None and self._provide is not None:
            provide, self._provide = self._provide, None
            try:
                self._quality = provide()
            except MindnetError:
                return None
        q = self._quality
        if q is None or q.model_id != spec.model_id or q.dim != spec.dim:
            return None
        return q

    def _quality_for(self, mode: Mode) -> Embedder | None:
        """The e5 embedder when this search fuses the e5 list: hybrid, Python fusion, weight > 0."""
        t = self.tuning
        if mode != "hybrid" or not t.language_fusion or t.e5_weight <= 0 or self.dense_vector == E5_VECTOR:
            return None
        return self.quality_embedder()

    def search(self, query: str, *, k: int = 10, mode: Mode = "hybrid", filters: SearchFilters | None = None,
               expand: bool = False, by_note: bool = False) -> list[Hit]:
        """The `k` best chunks (or notes) for a query.

        Args:
            query: free text, any configured language.
            k: results wanted.
            mode: `hybrid`, `dense` or `lexical`.
            filters: restrictions on type, tags, area, project, language, path, note, created date.
            expand: add prev/next neighbours and the best chunks of linked notes (R22).
            by_note: one hit per note: its best chunk, with the note's best score.

        Raises:
            MindnetError: an unknown mode or a non-positive `k`.
        """
        if mode not in MODES:
            raise MindnetError(f"unknown search mode {mode!r}; one of: {', '.join(MODES)}")
        if k < 1:
            raise MindnetError(f"k must be at least 1, not {k}")
        query = query.strip()
        if not query:
            return []
        flt = filters.to_filter() if filters else None
        t = self.tuning
        # by_note needs more chunks than notes wanted: a good note often brings several chunks.
        pool = max(4 * k, t.candidates) * (3 if by_note else 1)
        vector = self.embedder.embed_query(query) if (mode != "lexical" or expand) else None
        if mode == "dense":
            assert vector is not None
            cands = [_cand(p, "dense", dense=True) for p in self._dense(vector, pool, flt)]
        elif mode == "lexical":
            cands = [_cand(p, "lexical") for p in self._lexical(query, pool, flt)]
        else:
            assert vector is not None
            cands = self._hybrid(query, vector, pool, flt, self._quality_for(mode))
        if expand and cands:
            assert vector is not None
            cands = self._expand(cands, vector, flt)
        if by_note:
            cands = best_per_note(cands, t.note_sum_weight if mode == "hybrid" else 0.0)
        return [_hit(rank, c) for rank, c in enumerate(cands[:k], 1)]

    def candidate_lists(self, query: str, pool: int, flt: Filter | None = None) -> CandidateLists:
        """The dense, e5 (when the tier is there) and lexical lists and the query's language odds:
        everything `fuse` needs.

        Public so `bench/search.py` can fetch the lists once per question and try many fusion
        settings on them without asking the store again.
        """
        vector = self.embedder.embed_query(query)
        return CandidateLists(self._dense(vector, pool, flt), self._lexical(query, pool, flt),
                              query_languages(query, self.settings.languages),
                              self._quality_list(query, self._quality_for("hybrid"), pool, flt))

    def feedback_search(self, pool: int, flt: Filter | None = None) -> FeedbackSearch:
        """The store query behind `fuse`'s feedback list: BM25 with a weighted term vector, `pool`
        results, the search's filter. Public so `bench/search.py` can replay feedback settings."""

        def run(vector: SparseVec) -> list[ScoredPoint]:
            return self.store.search_sparse("chunks", vector, limit=pool, flt=flt)

        return run

    def build_context(self, hits: Sequence[Hit], budget_tokens: int, tokenizer: TokenCounter | None = None) -> Context:
        """`build_context` with the notes' `fulltext` read from the store, so merges are exact (R23).

        Args:
            hits: search results, best first.
            budget_tokens: the most tokens the context may take.
            tokenizer: counts tokens; defaults to the embedding model's (`embedder.count_tokens`).
        """
        counter: TokenCounter = tokenizer or _EmbedderCounter(self.embedder)
        return build_context(hits, budget_tokens, counter, fulltexts=note_fulltexts(self.store, _note_ids(hits)))

    # -- the three lists -------------------------------------------------------------------------

    def _dense(self, vector: Sequence[float], limit: int, flt: Filter | None) -> list[ScoredPoint]:
        return self.store.search_dense("chunks", self.dense_vector, vector, limit=limit, flt=flt)

    def _lexical(self, query: str, limit: int, flt: Filter | None) -> list[ScoredPoint]:
        return self.store.search_sparse("chunks", lexical_query(query, self.settings.languages), limit=limit, flt=flt)

    def _quality_list(self, query: str, quality: Embedder | None, limit: int, flt: Filter | None) -> list[ScoredPoint]:
        """Dense search on `e5`; chunks without the vector are not in it (the tier may be half filled)."""
        if quality is None:
            return []
        return self.store.search_dense("chunks", E5_VECTOR, quality.embed_query(query), limit=limit, flt=flt)

    def _hybrid(self, query: str, vector: Sequence[float], pool: int, flt: Filter | None,
                quality: Embedder | None = None) -> list[_Cand]:
        t = self.tuning
        if not t.language_fusion:
            sparse = lexical_query(query, self.settings.languages)
            fused = self.store.search_hybrid("chunks", self.dense_vector, vector, sparse, limit=pool, flt=flt,
                                             candidates=pool, rrf_k=t.rrf_k)
            return [_cand(p, "dense+lexical") for p in fused]
        lists = CandidateLists(self._dense(vector, pool, flt), self._lexical(query, pool, flt),
                               query_languages(query, self.settings.languages),
                               self._quality_list(query, quality, pool, flt))
        return fuse(query, lists, t, self.feedback_search(pool, flt))

    # -- expansion -------------------------------------------------------------------------------

    def _expand(self, cands: list[_Cand], vector: Sequence[float], flt: Filter | None) -> list[_Cand]:
        """Add neighbours and linked notes' best chunks, each scored below what led to it (R22)."""
        t = self.tuning
        by_id = {c.chunk_id: c for c in cands}
        added: dict[str, _Cand] = {}

        def offer(point_payload: dict[str, Any], chunk_id: str, score: float, dense: float | None = None) -> None:
            if chunk_id in by_id:
                return
            old = added.get(chunk_id)
            if old is None or score > old.score:
                added[chunk_id] = _Cand(chunk_id, score, point_payload, "expand", dense)

        # 1. prev/next of the top chunks: the sentence before or after a hit often holds the answer.
        top = cands[: t.expand_top]
        want: dict[str, float] = {}
        for c in top:
            for side in ("prev", "next"):
                nid = (c.payload.get("neighbors") or {}).get(side)
                if nid and nid not in by_id:
                    want[nid] = max(want.get(nid, 0.0), c.score * t.adjacent_decay)
        for p in self._chunks_by_id(list(want), flt):
            offer(p.payload, p.id, want[p.id])

        # 2. best chunk of every note linked from or to a top note, by the query's dense score.
        top_notes: dict[str, float] = {}
        for c in cands:
            nid = c.payload.get("note_id", "")
            if nid not in top_notes:
                top_notes[nid] = c.score
                if len(top_notes) >= t.expand_top:
                    break
        linked = self._linked_notes(top_notes)
        if linked:
            ref = max((c.dense for c in cands if c.dense is not None), default=None)
            limit = min(len(linked) * 3, 200)
            note_cond = AnyOf("note_id", tuple(linked))
            lflt = Filter(must=(note_cond, *flt.must), should=flt.should, must_not=flt.must_not) if flt else \
                Filter.all(note_cond)
            best: dict[str, ScoredPoint] = {}
            for p in self.store.search_dense("chunks", self.dense_vector, vector, limit=limit, flt=lflt):
                best.setdefault(str(p.payload.get("note_id", "")), p)
            if ref is None:
                ref = max((p.score for p in best.values()), default=1.0)
            boost: dict[str, float] = {}
            for note_id, p in best.items():
                rel = min(1.0, max(0.0, p.score / ref)) if ref > 0 else 0.0
                offer(p.payload, p.id, linked[note_id] * t.link_decay * rel, p.score)
                boost[note_id] = t.link_boost * linked[note_id] * rel
            if t.link_boost > 0:
                for c in cands:
                    c.score += boost.get(str(c.payload.get("note_id", "")), 0.0)
        return sorted([*cands, *added.values()], key=lambda c: -c.score)

    def _chunks_by_id(self, ids: list[str], flt: Filter | None) -> list[Any]:
        if not ids:
            return []
        if flt is None:
            return self.store.retrieve("chunks", ids)
        # Let the engine apply the same filter as the search, so filter semantics live in one place.
        return list(self.store.scroll("chunks", Filter(must=(AnyOf("chunk_id", tuple(ids)), *flt.must),
                                                       should=flt.should, must_not=flt.must_not)))

    def _linked_notes(self, top_notes: Mapping[str, float]) -> dict[str, float]:
        """Notes linked from or to the top notes, each with the score of its best linking top note."""
        if not top_notes:
            return {}
        ids = tuple(top_notes)
        flt = Filter(should=(
            # Outgoing: body links (chunk scope) and frontmatter links (note scope) of a top note.
            Filter(must=(AnyOf("note_id", ids), Equals("status", "resolved")),
                   must_not=(AnyOf("kind", (*STRUCTURAL_KINDS, "backlink")),)),
            # Incoming: `backlink` X->Y says Y links X, so a top note as source_id means incoming.
            Filter.all(Equals("kind", "backlink"), AnyOf("source_id", ids)),
        ))
        linked: dict[str, float] = {}
        for e in self.store.scroll("edges", flt):
            pl = e.payload
            if pl.get("kind") == "backlink":
                src, other = str(pl.get("source_id")), str(pl.get("target_id"))
            else:
                src, other = str(pl.get("note_id")), str(pl.get("target_id"))
            if src not in top_notes or other in top_notes:
                continue
            linked[other] = max(linked.get(other, 0.0), top_notes[src])
        strongest = sorted(linked.items(), key=lambda kv: -kv[1])[: self.tuning.max_linked_notes]
        return dict(strongest)


@dataclass(frozen=True, slots=True)
class CandidateLists:
    """What hybrid fusion starts from: the ranked lists and the query's language odds."""

    dense: Sequence[ScoredPoint]
    """The `use` list."""
    lexical: Sequence[ScoredPoint]
    query_langs: Mapping[str, float]
    """Language -> probability that the query is in it (configured languages only)."""
    quality: Sequence[ScoredPoint] = ()
    """The `e5` list; empty when the store has no quality tier (fusion is then exactly use + BM25)."""


def query_languages(query: str, languages: Sequence[str]) -> dict[str, float]:
    """Probability per configured language that the query is written in it.

    Code spans, links and URLs are removed first, as in `vault.detect_language`. With one
    language, or with almost no prose left, the answer is certain or uniform respectively.
    """
    langs = tuple(dict.fromkeys(languages))
    if len(langs) <= 1:
        return dict.fromkeys(langs, 1.0)
    prose = _LINK_SYNTAX.sub(" ", _CODE_SPAN.sub(" ", query))
    if len(prose.strip()) < 3:
        return dict.fromkeys(langs, 1.0 / len(langs))
    ranked = language_identifier(langs).rank(prose[:2000])
    return {str(lang): float(prob) for lang, prob in ranked if lang in langs}


_CODE_SPAN = re.compile(r"`[^`\n]*`")
_LINK_SYNTAX = re.compile(r"\[\[[^\]]*\]\]|\]\([^)]*\)|https?://\S+")
_WORD = re.compile(r"\w{2,}")


FeedbackSearch: TypeAlias = Callable[[SparseVec], Sequence[ScoredPoint]]
"""Runs a feedback query (weighted BM25 term vector) against the store, best chunks first."""


def fuse(query: str, lists: CandidateLists, tuning: SearchTuning,
         feedback: FeedbackSearch | None = None) -> list[_Cand]:
    """The hybrid ranking: language-aware RRF of the lists, the optional title boost, then the
    pseudo-relevance feedback list.

    Pure but for `feedback`, so the bench can replay it over cached lists with other settings. The
    e5 list counts only when it is non-empty and `e5_weight > 0`; then the `use` list weighs
    `use_weight_with_e5`. With `feedback` given and `feedback_weight > 0`, the words of the
    first-pass top `feedback_docs` chunks (`feedback_query`) are searched with `feedback` and that
    list is fused in with `feedback_weight` (`add_feedback`); without it the first pass is returned.
    """
    langs: Mapping[str, float] = lists.query_langs
    if not tuning.language_confidence and langs:
        langs = {max(langs, key=lambda lang: langs[lang]): 1.0}
    with_e5 = bool(lists.quality) and tuning.e5_weight > 0
    cands = rrf_fuse(lists.dense, lists.lexical, langs, rrf_k=tuning.rrf_k, weight_same=tuning.lexical_weight_same,
                     weight_other=tuning.lexical_weight_other, quality=lists.quality if with_e5 else (),
                     dense_weight=tuning.use_weight_with_e5 if with_e5 else 1.0, quality_weight=tuning.e5_weight)
    if tuning.title_boost > 0:
        words = {w.lower() for w in _WORD.findall(query)}
        scale = tuning.title_boost / (tuning.rrf_k + 1)
        for c in cands:
            c.score += scale * title_match(words, str(c.payload.get("note_title", "")))
        cands.sort(key=lambda c: -c.score)
    if feedback is not None and tuning.feedback_weight > 0 and tuning.feedback_docs > 0:
        vector = feedback_query(cands[: tuning.feedback_docs], tuning.feedback_terms)
        if vector.indices:
            cands = add_feedback(cands, feedback(vector), rrf_k=tuning.rrf_k, weight=tuning.feedback_weight)
    return cands


def feedback_query(top: Sequence[_Cand], terms: int) -> SparseVec:
    """A weighted BM25 query from the words of the top chunks (pseudo-relevance feedback).

    Each chunk's text is encoded as a BM25 document in its own language (`lexical_document`:
    that language's stopwords and stemmer, so the terms match how the chunk was indexed); the
    chunk at rank r counts 1/r. The `terms` heaviest terms are kept, scaled so the heaviest is 1.
    Term weights use no IDF: the engine applies it at query time, so a word common to the whole
    corpus still counts little. Empty when the chunks hold no indexable words.
    """
    weights: dict[int, float] = {}
    for rank, c in enumerate(top, 1):
        lang = c.payload.get("lang")
        doc = lexical_document(str(c.payload.get("text", "")), str(lang) if lang else None)
        for index, value in zip(doc.indices, doc.values, strict=True):
            weights[index] = weights.get(index, 0.0) + value / rank
    kept = sorted(weights.items(), key=lambda kv: (-kv[1], kv[0]))[: max(0, terms)]
    if not kept or kept[0][1] <= 0:
        return SparseVec((), ())
    heaviest = kept[0][1]
    kept.sort()
    return SparseVec(tuple(i for i, _ in kept), tuple(w / heaviest for _, w in kept))


def add_feedback(cands: Sequence[_Cand], feedback: Sequence[ScoredPoint], *, rrf_k: int,
                 weight: float) -> list[_Cand]:
    """The first-pass candidates with the feedback list's RRF terms `weight / (rrf_k + rank)` added.

    A chunk only the feedback list found joins with its feedback score alone. Inputs are not
    changed; the result is sorted, best first.
    """
    out = {c.chunk_id: replace(c) for c in cands}
    for rank, p in enumerate(feedback, 1):
        _add_part(out, p, weight / (rrf_k + rank), "feedback")
    return sorted(out.values(), key=lambda c: -c.score)


def _add_part(out: dict[str, _Cand], p: ScoredPoint, part: float, via: str) -> None:
    """Add one list's RRF term for `p`: to its candidate, or as a new candidate found by that list alone."""
    c = out.get(p.id)
    if c is None:
        out[p.id] = _Cand(p.id, part, p.payload, via)
    else:
        c.score += part
        c.via = f"{c.via}+{via}"


def title_match(query_words: set[str], title: str) -> float:
    """Share of the title's words (2+ characters, case-folded) that occur in the query."""
    title_words = {w.lower() for w in _WORD.findall(title)}
    if not title_words:
        return 0.0
    return len(title_words & query_words) / len(title_words)


def rrf_fuse(dense: Sequence[ScoredPoint], lexical: Sequence[ScoredPoint],
             query_lang: str | Mapping[str, float] | None, *, rrf_k: int = 60, weight_same: float = 1.0,
             weight_other: float = 1.0, quality: Sequence[ScoredPoint] = (), dense_weight: float = 1.0,
             quality_weight: float = 1.0) -> list[_Cand]:
    """Reciprocal Rank Fusion with a lexical weight that depends on the chunk's language.

    score(c) = dense_weight / (rrf_k + rank_dense(c)) + quality_weight / (rrf_k + rank_e5(c))
    + w(c) / (rrf_k + rank_lexical(c)), ranks 1-based, a missing rank contributing nothing (an
    empty `quality` list adds nothing: exactly the two-list fusion). `query_lang` is one language
    (certain) or language -> probability; w(c) = `weight_other + (weight_same - weight_other) *
    P(query in chunk's lang)`, which is `weight_same` or `weight_other` for a certain guess.
    Unknown query or chunk language: `weight_same` (nothing says the match is accidental). Both
    dense lists count regardless of language: the models are multilingual.
    """
    probs: Mapping[str, float] = {query_lang: 1.0} if isinstance(query_lang, str) else (query_lang or {})
    out: dict[str, _Cand] = {}
    for rank, p in enumerate(dense, 1):
        out[p.id] = _Cand(p.id, dense_weight / (rrf_k + rank), p.payload, "dense", p.score)
    for rank, p in enumerate(quality, 1):
        _add_part(out, p, quality_weight / (rrf_k + rank), E5_VECTOR)
    for rank, p in enumerate(lexical, 1):
        lang = p.payload.get("lang")
        if not probs or not lang:
            w = weight_same
        else:
            w = weight_other + (weight_same - weight_other) * probs.get(str(lang), 0.0)
        _add_part(out, p, w / (rrf_k + rank), "lexical")
    return sorted(out.values(), key=lambda c: -c.score)


def _cand(p: ScoredPoint, via: str, dense: bool = False) -> _Cand:
    return _Cand(p.id, p.score, p.payload, via, p.score if dense else None)


def best_per_note(cands: Sequence[_Cand], sum_weight: float = 0.0) -> list[_Cand]:
    """One candidate per note, its best chunk, ranked by the note's score.

    The note's score is its best chunk's plus `sum_weight` times the sum of its other chunks'
    scores (0: the best chunk alone). Chunks added by graph expansion do not add to the sum: they
    are context around a hit, not evidence, and expansion must not reorder what search found.
    The returned candidate carries the note's score.
    """
    best: dict[str, _Cand] = {}
    rest: dict[str, float] = {}
    for c in sorted(cands, key=lambda c: -c.score):
        note = str(c.payload.get("note_id", ""))
        if note in best:
            if c.via != "expand":
                rest[note] = rest.get(note, 0.0) + c.score
        else:
            best[note] = c
    if sum_weight <= 0:
        return list(best.values())
    out = [replace(c, score=c.score + sum_weight * rest.get(note, 0.0)) for note, c in best.items()]
    return sorted(out, key=lambda c: -c.score)


def _hit(rank: int, c: _Cand) -> Hit:
    pl = c.payload
    return Hit(
        rank=rank,
        score=float(c.score),
        note_id=str(pl.get("note_id", "")),
        path=str(pl.get("path", "")),
        title=str(pl.get("note_title", "")),
        chunk_id=c.chunk_id,
        section_path=str(pl.get("section_path", "/")),
        section_title=str(pl.get("section_title", "")),
        text=str(pl.get("text", "")),
        char_start=int(pl.get("char_start", 0)),
        char_end=int(pl.get("char_end", 0)),
        line_start=int(pl.get("line_start", 0)),
        line_end=int(pl.get("line_end", 0)),
        lang=str(pl.get("lang", "")),
        via=c.via,
    )


def _note_ids(hits: Iterable[Hit]) -> list[str]:
    return list(dict.fromkeys(h.note_id for h in hits))


# ---------------------------------------------------------------------------------------------
# Context (R23)
# ---------------------------------------------------------------------------------------------


class TokenCounter(Protocol):
    """Anything that counts tokens: `chunking.tokens.Tokenizer`, or an LLM's tokenizer wrapped."""

    def count(self, text: str) -> int: ...


class _EmbedderCounter:
    def __init__(self, embedder: Embedder) -> None:
        self._embedder = embedder

    def count(self, text: str) -> int:
        return self._embedder.count_tokens(text)


@dataclass(frozen=True, slots=True)
class Citation:
    """Where one passage of the context comes from; `n` is its `[n]` marker in the text."""

    n: int
    note_id: str
    title: str
    path: str
    section_path: str
    """Section of the passage's first hit."""
    section_title: str
    line_start: int
    """1-based file lines the passage covers."""
    line_end: int
    char_start: int
    """Span in the note's `fulltext`."""
    char_end: int
    chunk_ids: tuple[str, ...]
    """The hits merged into the passage."""
    truncated: bool = False
    """The passage was cut to fit the budget."""


@dataclass(frozen=True, slots=True)
class Context:
    """A token-budgeted context for an LLM prompt, with its sources."""

    text: str
    """Passages, each under a `[n] title — path › section (lines a–b)` header."""
    citations: tuple[Citation, ...]
    tokens: int
    """Tokens of `text` by the counter used; never above the budget."""


@dataclass(slots=True)
class _Segment:
    note_id: str
    start: int
    end: int
    hits: list[Hit] = field(default_factory=list)
    text: str = ""
    exact: bool = True

    @property
    def best_rank(self) -> int:
        return min(h.rank for h in self.hits)


_MIN_PASSAGE_TOKENS = 24
"""A passage cut shorter than this is not worth its header; skip it instead."""


def note_fulltexts(store: Store, note_ids: Sequence[str]) -> dict[str, str]:
    """`fulltext` of each note found in the notes collection (R4), for exact merging."""
    if not note_ids:
        return {}
    return {p.id: str(p.payload.get("fulltext", "")) for p in store.retrieve("notes", list(note_ids))}


def build_context(hits: Sequence[Hit], budget_tokens: int, tokenizer: TokenCounter, *,
                  fulltexts: Mapping[str, str] | None = None) -> Context:
    """Merge, order and budget hits into an LLM context with citations (R23).

    Hits of one note whose spans overlap or touch (only whitespace between them) become one
    passage, cut exactly from the note's `fulltext`, so the model sees each sentence once and in
    the author's order. Passages are chosen by relevance (the best rank among their hits) until
    the budget is spent (a passage that does not fit is cut at a line or word boundary, or
    skipped when too little would be left), then printed grouped by note (most relevant note
    first) and by position within the note.

    Args:
        hits: search results, best first (`rank` decides relevance).
        budget_tokens: the most tokens `Context.text` may take by `tokenizer`.
        tokenizer: counts tokens (`count(text) -> int`).
        fulltexts: note id -> `fulltext`; a note missing here keeps its hits as separate passages
            of their chunk text (a chunk contained in another is dropped).
    """
    fulltexts = fulltexts or {}
    segments = _segments(hits, fulltexts)
    chosen: list[tuple[_Segment, str, int, bool]] = []  # segment, text, line_end, truncated
    used = 0
    sep_cost = max(0, tokenizer.count("\n\n") - tokenizer.count(""))
    for seg in sorted(segments, key=lambda s: (s.best_rank, s.start)):
        left = budget_tokens - used - (sep_cost if chosen else 0)
        head = _header(len(chosen) + 1, seg, max(h.line_end for h in seg.hits))
        text, truncated = seg.text, False
        cost = tokenizer.count(f"{head}\n{text}")
        if cost > left:
            cut = _fit(head, text, left, tokenizer)
            if cut is None:
                continue
            text, truncated = cut, True
            cost = tokenizer.count(f"{head}\n{text}")
        line_end = _line_end(seg, text, truncated)
        chosen.append((seg, text, line_end, truncated))
        used += cost + (sep_cost if len(chosen) > 1 else 0)
    note_order = {nid: i for i, nid in enumerate(_note_ids(sorted(hits, key=lambda h: h.rank)))}
    chosen.sort(key=lambda item: (note_order[item[0].note_id], item[0].start))
    blocks: list[str] = []
    citations: list[Citation] = []
    for n, (seg, text, line_end, truncated) in enumerate(chosen, 1):
        first = min(seg.hits, key=lambda h: h.char_start)
        blocks.append(f"{_header(n, seg, line_end)}\n{text}")
        citations.append(Citation(
            n=n, note_id=seg.note_id, title=first.title, path=first.path, section_path=first.section_path,
            section_title=first.section_title, line_start=min(h.line_start for h in seg.hits), line_end=line_end,
            char_start=seg.start, char_end=seg.end if not truncated else seg.start + len(text),
            chunk_ids=tuple(h.chunk_id for h in sorted(seg.hits, key=lambda h: h.char_start)), truncated=truncated,
        ))
    out = "\n\n".join(blocks)
    # Counting the parts may differ from counting the whole by a few merged pieces; drop passages
    # from the end until the whole provably fits, so the budget is a guarantee.
    while blocks and tokenizer.count(out) > budget_tokens:
        blocks.pop()
        citations.pop()
        out = "\n\n".join(blocks)
    return Context(out, tuple(citations), tokenizer.count(out) if blocks else 0)


def _segments(hits: Sequence[Hit], fulltexts: Mapping[str, str]) -> list[_Segment]:
    by_note: dict[str, list[Hit]] = {}
    for h in hits:
        by_note.setdefault(h.note_id, []).append(h)
    out: list[_Segment] = []
    for note_id, note_hits in by_note.items():
        note_hits = sorted(note_hits, key=lambda h: (h.char_start, -h.char_end))
        full = fulltexts.get(note_id)
        segs: list[_Segment] = []
        for h in note_hits:
            cur = segs[-1] if segs else None
            if cur is not None and h.char_end <= cur.end:
                cur.hits.append(h)  # contained in what is already there
                continue
            touches = cur is not None and (
                h.char_start <= cur.end or (full is not None and not full[cur.end:h.char_start].strip()))
            if cur is not None and touches and full is not None:
                cur.end = max(cur.end, h.char_end)
                cur.hits.append(h)
            else:
                segs.append(_Segment(note_id, h.char_start, h.char_end, [h], exact=full is not None))
        for seg in segs:
            if full is not None:
                seg.text = full[seg.start:seg.end].strip()
            else:
                seg.text = seg.hits[0].text.strip()
        out.extend(segs)
    return out


def _header(n: int, seg: _Segment, line_end: int) -> str:
    first = min(seg.hits, key=lambda h: h.char_start)
    line_start = min(h.line_start for h in seg.hits)
    section = f" › {first.section_title}" if first.section_title else ""
    return f"[{n}] {first.title} — {first.path}{section} (lines {line_start}–{line_end})"


def _line_end(seg: _Segment, text: str, truncated: bool) -> int:
    full_end = max(h.line_end for h in seg.hits)
    if not truncated:
        return full_end
    start = min(h.line_start for h in seg.hits)
    return min(full_end, start + text.count("\n"))


def _fit(head: str, text: str, budget: int, tokenizer: TokenCounter) -> str | None:
    """The longest prefix of `text` ending at a line end (else a word end) whose block fits."""
    if budget < _MIN_PASSAGE_TOKENS or tokenizer.count(head) >= budget:
        return None
    cuts = [i for i, ch in enumerate(text) if ch == "\n"]
    words = [i for i, ch in enumerate(text) if ch.isspace()]

    def best(points: list[int]) -> int | None:
        lo, hi, found = 0, len(points) - 1, None
        while lo <= hi:
            mid = (lo + hi) // 2
            if tokenizer.count(f"{head}\n{text[:points[mid]].rstrip()} …") <= budget:
                found, lo = points[mid], mid + 1
            else:
                hi = mid - 1
        return found

    at = best(cuts)
    by_word = best(words)
    # A line cut is nicer, but not when it throws away most of what a word cut would keep.
    if at is None or (by_word is not None and at < by_word // 2):
        at = by_word
    if at is None:
        return None
    piece = text[:at].rstrip()
    if tokenizer.count(piece) < _MIN_PASSAGE_TOKENS:
        return None
    return f"{piece} …"


__all__ = [
    "DENSE_VECTOR",
    "E5_VECTOR",
    "MODES",
    "CandidateLists",
    "Citation",
    "Context",
    "FeedbackSearch",
    "Hit",
    "Mode",
    "SearchFilters",
    "SearchTuning",
    "Searcher",
    "TokenCounter",
    "add_feedback",
    "best_per_note",
    "build_context",
    "feedback_query",
    "fuse",
    "note_fulltexts",
    "query_languages",
    "rrf_fuse",
    "title_match",
]
