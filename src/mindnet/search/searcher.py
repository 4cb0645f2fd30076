"""Running a search against the store (R22): the ranked lists, graph expansion, per-note hits.

`Searcher` asks the store for chunks and turns what it finds into `Hit` records that carry
everything a citation needs (note, section, span, lines). Three modes:

* `dense`: cosine over the chunk vector `use`.
* `lexical`: BM25 over the sparse vector `bm25`; the query is tokenised under every configured
  language (`store.lexical_query`) because a query's language is only a guess.
* `hybrid` (default): the lists fused by `fusion.fuse` (language-aware RRF, the e5 list when the
  store holds the quality tier, pseudo-relevance feedback); see the `fusion` module.

Graph expansion (`expand=True`) adds the prev/next chunks of the top hits and the best chunk (by
the query's dense score) of every note linked from or to a top note, each scored below the hit
that led to it (`adjacent_decay`, `link_decay`), so expansion never reorders what search found.
It is off by default: it only adds context around hits, and re-ranking by links (`link_boost`)
lowered nDCG (docs/benchmarks.md, "Graph expansion"). Use it to give an LLM the surroundings of a hit.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Executor
from typing import Any, Literal, TypeAlias

from ..config import Settings
from ..embedding import Embedder
from ..errors import MindnetError
from ..points import DENSE_VECTOR, E5_VECTOR, NAME_FIELDS, NOTE_VECTOR
from ..store import (
    NOTE_SPARSE,
    AnyOf,
    Equals,
    Filter,
    ScoredPoint,
    SparseVec,
    Store,
    TextMatch,
    content_words,
    lexical_query,
)
from ..text import not_utf8_at
from ..titles import NamedNote, NoteNames, TitleIndex
from .context import Context, TokenCounter, _EmbedderCounter, _note_ids, build_context, note_fulltexts
from .filters import SearchFilters
from .fusion import (
    ADJUSTMENTS,
    LISTS,
    RARE_CHUNKS,
    CandidateLists,
    FeedbackSearch,
    RareWord,
    SearchTuning,
    _Cand,
    fuse,
    query_languages,
    rank_notes,
    uses_titles,
)
from .results import Explanation, Hit, NoteHit, Part

Mode: TypeAlias = Literal["hybrid", "dense", "lexical"]
MODES: tuple[Mode, ...] = ("hybrid", "dense", "lexical")
_Later: TypeAlias = Callable[[], list[ScoredPoint]]
"""A list still being fetched (or fetched on demand): calling it waits for it."""
LIST_FIELDS = ("note_id", "note_title", "lang")
"""The payload fields read with every candidate of a list: what fusion, ranking by note and the title boost
look at (the chunk id comes with every point). The rest, the text above all, is read once a search knows
which chunks it shows (`Searcher._complete`): decoding whole payloads for the ~250 candidates of a hybrid
query's lists was a quarter of its time at 100k chunks (issue 25)."""


# ---------------------------------------------------------------------------------------------
# Search
# ---------------------------------------------------------------------------------------------


def note_names(store: Store) -> NoteNames:
    """Every note's title and aliases, and its area and project, from the notes collection: what the
    title list looks names up in (`TitleIndex`)."""
    return names_of([(p.id, p.payload) for p in store.scroll("notes", fields=list(NAME_FIELDS))])


def names_of(notes: Sequence[tuple[str, Mapping[str, Any]]]) -> NoteNames:
    """The title list's names of `(note id, its note point's NAME_FIELDS)` pairs, in their order: from a scroll
    of the notes (`note_names`), or from what a resident keeps of them (`sync.StoredStates.rows`)."""
    names = tuple((note_id, str(name)) for note_id, fields in notes
                  for name in [fields.get("title") or "", *(fields.get("aliases") or [])])
    groups = tuple((note_id, str(fields[field])) for note_id, fields in notes for field in ("area", "project")
                   if fields.get(field))
    return names, groups


class Searcher:
    """Search over one store with one embedder; cheap to create, no state between queries but the
    quality-tier model, loaded once on first use."""

    def __init__(self, store: Store, embedder: Embedder, settings: Settings, *,
                 tuning: SearchTuning | None = None, dense_vector: str = DENSE_VECTOR,
                 quality: Embedder | Callable[[], Embedder | None] | None = None,
                 executor: Executor | None = None, titles: Callable[[], TitleIndex] | None = None) -> None:
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
            executor: where the e5 list (query embedding and search) is made while this thread
                embeds the query with USE and asks the store for the other lists (`_e5_list`);
                None makes it in line. The caller owns it and shuts it down (`api.Index.close`).
            titles: where the title list's index comes from, asked once (a one-off search: made from the
                names kept beside the store, `name_file`; a resident: the one it keeps while no write changed
                the names); None makes it from the notes collection (`note_names`) and again whenever its count
                changes (a resident outlives imports).
        """
        self.store = store
        self.embedder = embedder
        self.settings = settings
        self.tuning = tuning or SearchTuning()
        self.dense_vector = dense_vector
        self.executor = executor
        self._quality: Embedder | None = quality if isinstance(quality, Embedder) else None
        self._provide: Callable[[], Embedder | None] | None = None if isinstance(quality, Embedder) else quality
        """Still to be asked for the model; None once asked, or when a model was given."""
        self._titles: tuple[int, TitleIndex] | None = None
        """The title/alias index and the notes count it was built at (rebuilt when that changes)."""
        self._title_index = titles

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

    def title_matches(self, query: str) -> list[NamedNote]:
        """The notes the query names by title or alias, each with its name's share (`TitleIndex.named`),
        longest name first.

        The index is asked for once from `titles` when given; else built from the notes collection, and again
        only when the number of notes changed (a resident searcher outlives imports)."""
        if self._title_index is not None:
            if self._titles is None:
                self._titles = (-1, self._title_index())
            return self._titles[1].named(query)
        count = self.store.count("notes")
        if self._titles is None or self._titles[0] != count:
            self._titles = (count, TitleIndex(*note_names(self.store)))
        return self._titles[1].named(query)

    def _quality_for(self, mode: Mode) -> Embedder | None:
        """The e5 embedder when this search fuses the e5 list: hybrid, Python fusion, weight > 0."""
        t = self.tuning
        if mode != "hybrid" or not t.language_fusion or t.e5_weight <= 0 or self.dense_vector == E5_VECTOR:
            return None
        return self.quality_embedder()

    def search(self, query: str, *, k: int = 10, mode: Mode = "hybrid", filters: SearchFilters | None = None,
               expand: bool = False, by_note: bool = False, explain: bool = False) -> list[Hit]:
        """The `k` best chunks (or notes) for a query.

        Args:
            query: free text, any configured language.
            k: results wanted.
            mode: `hybrid`, `dense` or `lexical`.
            filters: restrictions on type, tags, area, project, language, path, note, created date.
            expand: add prev/next neighbours and the best chunks of linked notes (R22).
            by_note: one hit per note: its best chunk, with the note's best score.
            explain: give each hit what every list and adjustment added to its score (`Hit.explain`).

        Raises:
            MindnetError: an unknown mode, a non-positive `k`, or a query that is not UTF-8.
        """
        found = self._candidates(query, k, mode, filters, expand, by_note)
        if found is None:
            return []
        cands, lists = found
        if by_note:
            cands = self._rank_notes(cands, lists, mode)
        chosen = self._complete(cands[:k])
        return [_hit(rank, c, explain and mode == "hybrid") for rank, c in enumerate(chosen, 1)]

    def search_notes(self, query: str, *, k: int = 10, sections: int = 3, mode: Mode = "hybrid",
                     filters: SearchFilters | None = None, explain: bool = False) -> list[NoteHit]:
        """The `k` best notes, each with its best `sections` chunks: what a person scanning results wants
        (one line per note, not one note three times), from the same ranking as `search(by_note=True)`.

        Raises:
            MindnetError: as `search`, or `sections` below 1.
        """
        if sections < 1:
            raise MindnetError(f"sections must be at least 1, not {sections}")
        found = self._candidates(query, k, mode, filters, False, True)
        if found is None:
            return []
        cands, lists = found
        notes = self._rank_notes(cands, lists, mode)
        chunks: dict[str, list[_Cand]] = {}
        for c in sorted(cands, key=lambda c: -c.score):
            chunks.setdefault(str(c.payload.get("note_id", "")), []).append(c)
        with_explain = explain and mode == "hybrid"
        shown = [(note, chunks.get(str(note.payload.get("note_id", "")), [note])[:sections]) for note in notes[:k]]
        complete = {c.chunk_id for c in self._complete([c for _, best in shown for c in best])}
        out: list[NoteHit] = []
        for note, best in shown:
            hits = tuple(_hit(i, c, with_explain) for i, c in enumerate((c for c in best if c.chunk_id in complete), 1))
            if hits:  # a note whose chunks are all gone since the lists were read is left out
                out.append(NoteHit(len(out) + 1, float(note.score), hits[0].note_id, hits[0].path, hits[0].title,
                                   hits, _explanation(note) if with_explain else None))
        return out

    def _rank_notes(self, cands: list[_Cand], lists: CandidateLists | None, mode: Mode) -> list[_Cand]:
        """`rank_notes` as both rankings by note use it: the note sum only counts in hybrid search."""
        return rank_notes(cands, lists, self.tuning, self.tuning.note_sum_weight if mode == "hybrid" else 0.0)

    def _candidates(self, query: str, k: int, mode: Mode, filters: SearchFilters | None, expand: bool,
                    by_note: bool) -> tuple[list[_Cand], CandidateLists | None] | None:
        """The checked query's candidates, best first, and the lists hybrid fused (None for the other
        modes); None for an empty query."""
        # Bytes from a terminal that were not UTF-8: the tokenizer would raise a TypeError on them.
        if (bad := not_utf8_at(query)) is not None:
            raise MindnetError(f"the query is not valid UTF-8 (at character {bad + 1}); "
                               "set the terminal to UTF-8 or retype it")
        if mode not in MODES:
            raise MindnetError(f"unknown search mode {mode!r}; one of: {', '.join(MODES)}")
        if k < 1:
            raise MindnetError(f"k must be at least 1, not {k}")
        query = query.strip()
        if not query:
            return None
        if filters and filters.lang and filters.lang not in self.settings.languages:
            # every chunk's language is detected among the vault's, so this filter could only answer nothing
            raise MindnetError(f"lang {filters.lang!r} is not a vault language ({', '.join(self.settings.languages)}); "
                               "chunks are detected among those only (setting `languages`)")
        flt = filters.to_filter(self.store.facet("chunks", "tags") if filters.tags else ()) if filters else None
        t = self.tuning
        # by_note needs more chunks than notes wanted: a good note often brings several chunks.
        pool = max(4 * k, t.candidates) * (3 if by_note else 1)
        e5_list = self._e5_list(query, self._quality_for(mode), pool, flt)  # first: it runs beside all that follows
        vector = self.embedder.embed_query(query) if (mode != "lexical" or expand) else None
        lists: CandidateLists | None = None
        if mode == "dense":
            assert vector is not None
            cands = [_cand(p, "dense", dense=True) for p in self._dense(vector, pool, flt)]
        elif mode == "lexical":
            cands = [_cand(p, "lexical") for p in self._lexical(query, pool, flt)]
        else:
            assert vector is not None
            cands, lists = self._hybrid(query, vector, pool, flt, e5_list)
        if expand and cands:
            assert vector is not None
            cands = self._expand(self._complete(cands[: t.expand_top]) + cands[t.expand_top:], vector, flt)
        return cands, lists

    def candidate_lists(self, query: str, pool: int, flt: Filter | None = None,
                        fields: Sequence[str] | None = None) -> CandidateLists:
        """The dense, e5 (when the tier is there) and lexical lists and the query's language odds:
        everything `fuse` needs, each candidate with `fields` of its payload (None: all of it).

        Public so `bench/search.py` can fetch the lists once per question and try many fusion
        settings on them without asking the store again.
        """
        e5_list = self._e5_list(query, self._quality_for("hybrid"), pool, flt, fields=fields)
        vector = self.embedder.embed_query(query)
        return self._lists(query, vector, pool, flt, e5_list, titles=True, every=True, fields=fields)

    def _lists(self, query: str, vector: Sequence[float], pool: int, flt: Filter | None, e5_list: _Later | None,
               *, titles: bool, every: bool = False, fields: Sequence[str] | None = LIST_FIELDS) -> CandidateLists:
        """Every list hybrid fusion reads, from the store: chunk lists, note-level lists, the rare word. A
        list whose weight is 0 is not asked for, unless `every` (the bench replays other weights). `fields`:
        the payload read with each candidate (None: all of it)."""
        lexical = self._lexical(query, pool, flt, fields)
        return CandidateLists(self._dense(vector, pool, flt, fields), lexical,
                              query_languages(query, self.settings.languages, self.settings.cache_dir),
                              e5_list() if e5_list else [], self.title_matches(query) if titles else (),
                              notes=self._notes(vector, pool, flt, every, fields),
                              notes_lexical=self._notes_lexical(query, pool, flt, every, fields),
                              rare=self._rare(query, lexical, every))

    def feedback_search(self, pool: int, flt: Filter | None = None,
                        fields: Sequence[str] | None = None) -> FeedbackSearch:
        """The store query behind `fuse`'s feedback list: BM25 with a weighted term vector, `pool`
        results, the search's filter, `fields` of each payload (None: all). Public so `bench/search.py`
        can replay feedback settings."""

        def run(vector: SparseVec) -> list[ScoredPoint]:
            return self.store.search_sparse("chunks", vector, limit=pool, flt=flt, fields=fields)

        return run

    def chunk_texts(self, chunk_ids: Sequence[str]) -> dict[str, str]:
        """The chunks' texts by id (`fusion.ChunkTexts`): what the feedback query reads of its top chunks
        when the lists were read with `LIST_FIELDS` only."""
        return {p.id: str(p.payload.get("text", "")) for p in self.store.retrieve("chunks", chunk_ids)}

    def _complete(self, cands: Sequence[_Cand]) -> list[_Cand]:
        """The candidates with their whole payloads, read in one call for those that came from a list with
        `LIST_FIELDS` only; a chunk gone from the store since (a resident's import between the two reads) is
        left out rather than shown without its text."""
        partial = [c.chunk_id for c in cands if "text" not in c.payload]
        if not partial:
            return list(cands)
        full = {p.id: p.payload for p in self.store.retrieve("chunks", partial)}
        out = []
        for c in cands:
            if "text" not in c.payload:
                if c.chunk_id not in full:
                    continue
                c.payload = full[c.chunk_id]
            out.append(c)
        return out

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

    def _dense(self, vector: Sequence[float], limit: int, flt: Filter | None,
               fields: Sequence[str] | None = LIST_FIELDS) -> list[ScoredPoint]:
        return self.store.search_dense("chunks", self.dense_vector, vector, limit=limit, flt=flt, fields=fields)

    def _lexical(self, query: str, limit: int, flt: Filter | None,
                 fields: Sequence[str] | None = LIST_FIELDS) -> list[ScoredPoint]:
        return self.store.search_sparse("chunks", self._sparse_query(query), limit=limit, flt=flt, fields=fields)

    def _sparse_query(self, query: str) -> SparseVec:
        """The BM25 query under every vault language, strict when `Settings.lexical_strict` says so
        (the feedback list needs no such rule: its terms come from chunks encoded in their own language)."""
        return lexical_query(query, self.settings.languages, strict=self.settings.lexical_strict)

    def _e5_list(self, query: str, quality: Embedder | None, limit: int, flt: Filter | None,
                 fields: Sequence[str] | None = LIST_FIELDS) -> _Later | None:
        """The `e5` list, to be collected when fusion needs it; None without the tier.

        Dense search on `e5` with the e5 query vector; chunks without the vector are not in it (the
        tier may be half filled). With an executor it starts now on its thread: onnxruntime and
        Edge release the GIL, so e5's forward pass (~8 ms CPU, most of a filled store's query) and
        its search run on the second core while this thread embeds with USE and runs the dense
        and BM25 searches. The list is the same either way (the same calls on the same model and
        store), so the ranking is too.
        """
        if quality is None:
            return None

        def run() -> list[ScoredPoint]:
            return self.store.search_dense("chunks", E5_VECTOR, quality.embed_query(query), limit=limit, flt=flt,
                                           fields=fields)

        return run if self.executor is None else self.executor.submit(run).result

    def _hybrid(self, query: str, vector: Sequence[float], pool: int, flt: Filter | None,
                e5_list: _Later | None = None) -> tuple[list[_Cand], CandidateLists | None]:
        t = self.tuning
        if not t.language_fusion:
            sparse = self._sparse_query(query)
            fused = self.store.search_hybrid("chunks", self.dense_vector, vector, sparse, limit=pool, flt=flt,
                                             candidates=pool, rrf_k=t.rrf_k)
            return [_cand(p, "dense+lexical") for p in fused], None
        lists = self._lists(query, vector, pool, flt, e5_list, titles=uses_titles(t))
        return fuse(query, lists, t, self.feedback_search(pool, flt, LIST_FIELDS), self.chunk_texts), lists

    def _has_note_level(self) -> bool:
        """Whether the store's chunks carry note-level vectors (an import with `note_vectors`)."""
        schema = self.store.meta()
        return schema is not None and any(v.name == NOTE_VECTOR for v in schema.vectors)

    def _notes(self, vector: Sequence[float], limit: int, flt: Filter | None, every: bool = False,
               fields: Sequence[str] | None = LIST_FIELDS) -> list[ScoredPoint]:
        """The note-level dense list: lead chunks by their note's closest window."""
        wanted = every or self.tuning.note_weight > 0
        if not wanted or self.dense_vector != DENSE_VECTOR or not self._has_note_level():
            return []
        return self.store.search_dense("chunks", NOTE_VECTOR, vector, limit=limit, flt=flt, fields=fields)

    def _notes_lexical(self, query: str, limit: int, flt: Filter | None, every: bool = False,
                       fields: Sequence[str] | None = LIST_FIELDS) -> list[ScoredPoint]:
        """The note-level BM25 list: lead chunks by their note's fielded document."""
        t = self.tuning
        wanted = every or max(t.note_lexical_weight_same, t.note_lexical_weight_other) > 0
        if not wanted or not self._has_note_level():
            return []
        return self.store.search_sparse("chunks", self._sparse_query(query), limit=limit, flt=flt, using=NOTE_SPARSE,
                                        fields=fields)

    def _rare(self, query: str, lexical: Sequence[ScoredPoint], every: bool = False) -> RareWord | None:
        """The lexical top chunk with the query words it holds that at most `RARE_CHUNKS` chunks of the vault
        hold (a full-text count up to `RARE_CHUNKS` + 1 per word, at most `_RARE_PROBES` words), or None."""
        if not (every or self.tuning.exact_words) or not lexical:
            return None
        words = content_words(query, self.settings.languages)
        top = lexical[0]
        text = top.payload["text"] if "text" in top.payload else self.chunk_texts([top.id]).get(top.id, "")
        have = {w.lower() for w in _WORDS.findall(f"{text} {top.payload.get('note_title', '')}")}
        probes = [w for w in words if w.lower() in have and len(w) <= 64][:_RARE_PROBES]
        rare = tuple(w for w in probes if self._chunks_holding(w, RARE_CHUNKS + 1) <= RARE_CHUNKS)
        if not rare:
            return None
        return RareWord(top.id, rare, whole_query={w.lower() for w in rare} == {w.lower() for w in words})

    def _chunks_holding(self, word: str, cap: int) -> int:
        """How many chunks hold `word`, counted up to `cap`.

        A word of letters (or letters and digits) is counted in the chunk texts' full-text index. A number is
        counted in the BM25 index instead (its term's first `cap` chunks): a store's full-text index made before
        the word tokenizer (`store.base.TEXT_TOKENIZER`; remade at the store's next import) indexes no number, so
        there every number, "404" in every note as much as an error code in one, counted as held by none and made
        its lexical top chunk an exact-word hit."""
        if not word.isdecimal():
            return self.store.count_up_to("chunks", Filter.all(TextMatch("text", word)), cap)
        return len(self.store.search_sparse("chunks", self._sparse_query(word), limit=cap, fields=()))

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
        from ..graph import STRUCTURAL_KINDS  # here, not at the top: a search without `expand` needs no graph module

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



def _cand(p: ScoredPoint, via: str, dense: bool = False) -> _Cand:
    return _Cand(p.id, p.score, p.payload, via, p.score if dense else None)


_WORDS = re.compile(r"[^\W_]+")
_RARE_PROBES = 6
"""Query words looked up in the full-text index per search, at most: each reads up to `RARE_CHUNKS` + 1 ids."""


def _explanation(c: _Cand) -> Explanation:
    """A candidate's parts in list order, then the adjustments; they sum to its score."""
    order = [*LISTS, *ADJUSTMENTS]
    names = sorted(c.parts, key=lambda n: order.index(n) if n in order else len(order))
    return Explanation(tuple(Part(n, c.parts[n], c.ranks.get(n)) for n in names))


def _hit(rank: int, c: _Cand, explain: bool = False) -> Hit:
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
        explain=_explanation(c) if explain else None,
    )


__all__ = ["MODES", "Hit", "Mode", "NoteHit", "Searcher", "names_of", "note_names"]
