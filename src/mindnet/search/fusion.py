"""How candidate lists become one ranking (R22): the hybrid fusion, pure, no store I/O.

`Searcher` fetches the lists from the store; everything here turns them into scores, so
`bench/search.py` can replay it over cached lists with other settings. In order:

1. language-aware RRF of the chunk lists: dense (`use`), the e5 tier when the store holds it, and BM25
   weighed by how likely the query is in the chunk's language (a word match across languages is
   mostly accidental);
2. pseudo-relevance feedback: the words of the first pass's top chunks, searched with BM25 again;
3. language slots: each rank keeps the language the dense list has there;
4. the title/alias list: a note the query names rises on its best chunk;
5. the note-level lists: each note's windows (dense) and its fielded BM25 document, added to the note's
   best chunk, so a note ranks by what it is about and the chunk list picks the section to cite;
6. exact words: the chunk holding a word the vault barely has stays near the top.

Every candidate keeps what each step added (`_Cand.parts`, `ranks`): that is `--explain`.
The knobs and the measurements behind them: `SearchTuning`, docs/decisions/fusion-knobs.md.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, TypeAlias

from ..language import language_identifier
from ..points import E5_VECTOR
from ..store import ScoredPoint, SparseVec, lexical_document
from ..titles import NamedNote


@dataclass(frozen=True, slots=True)
class SearchTuning:
    """Knobs of fusion and expansion. Each default is what `bench/search.py loo` picks leaving one cell
    out (or a requirement, `exact_words`); the figures behind each value: docs/decisions/fusion-knobs.md."""

    rrf_k: int = 10
    """RRF constant: small, so the top of each list counts far more than its tail."""
    candidates: int = 50
    """Candidates per list before fusion (at least `4 * k` are taken)."""
    lexical_weight_same: float = 1.25
    """Weight of a chunk BM25 rank when the chunk is in the query's language."""
    lexical_weight_other: float = 0.25
    """Weight of a chunk BM25 rank when the chunk is in another language: across languages a word match
    is mostly accidental (a name, a number, a stem that collides)."""
    language_confidence: bool = True
    """Weigh by how sure the language guess is: a chunk in language L gets `other + (same - other) *
    P(query is L)`, so a short keyword query whose language is a coin toss keeps its exact matches.
    False: the hard guess."""
    title_boost: float = 0.0
    """When > 0, a chunk gains `title_boost * share of its note title's words found in the query /
    (rrf_k + 1)` (hybrid only; off)."""
    title_weight: float = 1.0
    """Weight of the title/alias list (`mindnet.titles`) for a note in another language than the query: a
    named note's best chunk gains `w * share / (rrf_k + 1)`, `share` = 1 / the notes carrying the name."""
    title_weight_same: float = 0.0
    """The same for a note in the query's language, where BM25 has already matched the name's words."""
    note_sum_weight: float = 0.05
    """With `by_note`, a note scores its best chunk plus this times the sum of its other chunks' scores."""
    note_ranks: bool = False
    """Rank each chunk list by notes: a note's first chunk in a list counts at the note's rank among that
    list's notes, its later chunks not at all."""
    note_weight: float = 0.5
    """Weight of the note-level dense list (each note's windows, `points.NOTE_VECTOR`): a note's rank in it
    adds `w / (rrf_k + rank)` to its best chunk. 0 leaves the list out (and its store query).
    Why 0.5, after the slots: docs/decisions/search-representation.md."""
    note_lexical_weight_same: float = 0.0
    """Weight of the note-level BM25 list (each note's title, aliases, headings and path as one fielded
    document) for a note in the query's language; 0 with `note_lexical_weight_other` (the default: it
    did not help out of sample) leaves it out and saves its store query."""
    note_lexical_weight_other: float = 0.0
    """The same for a note in another language."""
    notes_before_slots: bool = False
    """Add the note-level lists before the language slots re-deal the ranking, so they reorder each
    language among itself; False (default): after them, as evidence in any language, like a name."""
    exact_words: bool = True
    """Keep exact words: when the chunk BM25 ranks first holds a word the vault has in at most
    `RARE_CHUNKS` chunks, it is placed at rank `exact_rank` at worst (rank 1 when the query is nothing
    but such words). A name, an error code or a made-up word is what the person expects to see."""
    exact_rank: int = 3
    """The worst fused rank a chunk holding a rare query word may take (see `exact_words`)."""
    e5_weight: float = 0.5
    """Weight of a rank in the `e5` list (quality tier); 0 leaves the list out (and skips the e5 query
    embedding). Only used when the store holds `e5` vectors. Why 0.5: docs/decisions/e5-weights.md."""
    use_weight_with_e5: float = 1.0
    """Weight of a rank in the `use` list when the `e5` list takes part (1.0 without it)."""
    feedback_weight: float = 0.5
    """Weight of the pseudo-relevance feedback list: BM25 over the words of the first pass's top chunks,
    each in its own language, so a question gets lexical evidence in the notes' own words even across
    languages. 0 leaves it out and saves its store query."""
    feedback_docs: int = 5
    """First-pass top chunks whose words make the feedback query, the chunk at rank r counting 1/r."""
    feedback_terms: int = 20
    """Heaviest terms kept in the feedback query."""
    dense_floor: float = 0.25
    """Dense hits below this share of the top hit's cosine take no part (`close_to_top`); 0 keeps all. A
    guard for small stores, where a chunk far from the question still gets an RRF rank."""
    language_slots: bool = True
    """Keep the dense list's language at every rank: the fused ranking is re-dealt so that rank r holds a
    chunk of the language dense has at rank r. BM25 only matches the question's language, so in a mixed
    vault it would lift every same-language chunk over the other language's answer."""
    language_fusion: bool = True
    """False fuses inside the engine (`store.search_hybrid`, plain RRF of `use` and BM25 only)."""
    expand_top: int = 5
    """How many top hits (chunks) and top notes are expanded."""
    adjacent_decay: float = 0.5
    """Score of a prev/next neighbour relative to its hit."""
    link_decay: float = 0.7
    """Score of a linked note's best chunk relative to the linking hit (times its relative cosine)."""
    max_linked_notes: int = 20
    """Linked notes considered per query: a hub note linking hundreds must not flood the results."""
    link_boost: float = 0.0
    """When > 0, chunks whose note is linked from or to a top note gain `link_boost * score(linking hit) *
    relative cosine`: a re-ranking by the graph, off: it lowered nDCG (docs/benchmarks.md, "Graph expansion")."""


RARE_CHUNKS = 3
"""A query word the vault holds in at most this many chunks is rare (`SearchTuning.exact_words`)."""
LISTS = ("dense", "e5", "lexical", "feedback", "title", "note", "note_lexical")
"""The ranked lists a hybrid score is made of, in the order `Hit.via` names them."""
ADJUSTMENTS = ("slots", "exact", "note_sum")
"""What moves a score besides the lists: the language slots' re-deal, an exact word's place, and (by note)
the note's other chunks. With the lists' parts they add up to the score (`_Cand.parts`)."""


@dataclass(slots=True)
class _Cand:
    """A chunk under consideration, before ranks are assigned."""

    chunk_id: str
    score: float
    payload: dict[str, Any]
    via: str
    dense: float | None = None
    """Cosine to the query when known (dense list or linked-note search)."""
    parts: dict[str, float] = field(default_factory=dict)
    """What each list (`LISTS`) and adjustment (`ADJUSTMENTS`) added to `score`; they sum to it in hybrid."""
    ranks: dict[str, int] = field(default_factory=dict)
    """The chunk's (or its note's) 1-based rank in each list that holds it; `slots`: the rank it was dealt."""

    def add(self, name: str, part: float, rank: int | None = None) -> None:
        """Count `part` from list or adjustment `name` (at `rank` in it), and name the list in `via`."""
        self.score += part
        self.parts[name] = self.parts.get(name, 0.0) + part
        if rank is not None:
            self.ranks.setdefault(name, rank)
        if name in LISTS and name not in self.via.split("+"):
            self.via = f"{self.via}+{name}" if self.via else name

    def copy(self) -> _Cand:
        """An independent copy (its own parts and ranks).

        Built field by field: `dataclasses.replace` costs ~4 µs a call, and a search copies a few hundred
        candidates (by note, the language slots): in-process at 1,000 notes a search's p50 went ~8.2 → ~7.7 ms."""
        return _Cand(self.chunk_id, self.score, self.payload, self.via, self.dense, dict(self.parts), dict(self.ranks))


def _new(p: ScoredPoint, name: str, part: float, rank: int, dense: float | None = None) -> _Cand:
    """A candidate first found by list `name`, at `rank`, worth `part`."""
    return _Cand(p.id, part, p.payload, name, dense, {name: part}, {name: rank})


@dataclass(frozen=True, slots=True)
class RareWord:
    """The chunk BM25 ranks first, when it holds query words the vault has in at most `RARE_CHUNKS` chunks."""

    chunk_id: str
    words: tuple[str, ...]
    whole_query: bool
    """Every content word of the query is one of `words`: the person typed only the rare thing."""


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
    titles: Sequence[NamedNote] = ()
    """The notes the query names by title or alias, with each name's share (`TitleIndex.named`)."""
    notes: Sequence[ScoredPoint] = ()
    """The note-level dense list: notes' lead chunks ranked by their closest window."""
    notes_lexical: Sequence[ScoredPoint] = ()
    """The note-level BM25 list: notes' lead chunks ranked by their fielded whole-note document."""
    rare: RareWord | None = None
    """The lexical top chunk and its rare query words, if it holds any (`SearchTuning.exact_words`)."""


def query_languages(query: str, languages: Sequence[str], cache_dir: str | None = None) -> dict[str, float]:
    """Probability per configured language that the query is written in it.

    Code spans, links and URLs are removed first, as in `language.detect_language`. With one
    language, or with almost no prose left, the answer is certain or uniform respectively.
    """
    langs = tuple(dict.fromkeys(languages))
    if len(langs) <= 1:
        return dict.fromkeys(langs, 1.0)
    prose = _LINK_SYNTAX.sub(" ", _CODE_SPAN.sub(" ", query))
    if len(prose.strip()) < 3:
        return dict.fromkeys(langs, 1.0 / len(langs))
    ranked = language_identifier(langs, cache_dir).rank(prose[:2000])
    return {str(lang): float(prob) for lang, prob in ranked if lang in langs}


_CODE_SPAN = re.compile(r"`[^`\n]*`")
_LINK_SYNTAX = re.compile(r"\[\[[^\]]*\]\]|\]\([^)]*\)|https?://\S+")
_WORD = re.compile(r"\w{2,}")


FeedbackSearch: TypeAlias = Callable[[SparseVec], Sequence[ScoredPoint]]
"""Runs a feedback query (weighted BM25 term vector) against the store, best chunks first."""
ChunkTexts: TypeAlias = Callable[[Sequence[str]], Mapping[str, str]]
"""The texts of chunks by id, read from the store: for lists whose payloads were read without them."""


def fuse(query: str, lists: CandidateLists, tuning: SearchTuning,
         feedback: FeedbackSearch | None = None, texts: ChunkTexts | None = None) -> list[_Cand]:
    """The hybrid ranking, in the module docstring's order; best first.

    Pure but for `feedback` (the store query behind the feedback list) and `texts` (where the feedback
    query reads its top chunks' words when the lists carry no `text`; None: from their payloads), so the
    bench can replay it over cached lists with other settings. The e5 list counts only when it is
    non-empty and `e5_weight > 0`; then the `use` list weighs `use_weight_with_e5`.
    """
    langs = tuned_languages(lists.query_langs, tuning)
    with_e5 = bool(lists.quality) and tuning.e5_weight > 0
    dense = close_to_top(lists.dense, tuning.dense_floor)
    cands = rrf_fuse(dense, lists.lexical, langs, rrf_k=tuning.rrf_k, weight_same=tuning.lexical_weight_same,
                     weight_other=tuning.lexical_weight_other, quality=lists.quality if with_e5 else (),
                     dense_weight=tuning.use_weight_with_e5 if with_e5 else 1.0, quality_weight=tuning.e5_weight,
                     note_ranks=tuning.note_ranks)
    if tuning.title_boost > 0:
        words = {w.lower() for w in _WORD.findall(query)}
        scale = tuning.title_boost / (tuning.rrf_k + 1)
        for c in cands:
            if share := title_match(words, str(c.payload.get("note_title", ""))):
                c.add("title", scale * share)
        cands.sort(key=lambda c: -c.score)
    return after_first_pass(cands, lists, dense, tuning, feedback, texts)


def tuned_languages(query_langs: Mapping[str, float], tuning: SearchTuning) -> Mapping[str, float]:
    """The query's language odds as fusion uses them: the odds, or the hard guess without confidence."""
    if not tuning.language_confidence and query_langs:
        return {max(query_langs, key=lambda lang: query_langs[lang]): 1.0}
    return query_langs


def after_first_pass(cands: list[_Cand], lists: CandidateLists, dense: Sequence[ScoredPoint], tuning: SearchTuning,
                     feedback: FeedbackSearch | None, texts: ChunkTexts | None = None) -> list[_Cand]:
    """What follows the RRF first pass (`cands`, best first): the feedback list, the language slots
    over `dense` (the dense list after its floor), the title/alias list, the note-level lists and the
    exact words. `texts` as in `fuse`."""
    if feedback is not None and tuning.feedback_weight > 0 and tuning.feedback_docs > 0:
        top = cands[: tuning.feedback_docs]
        vector = feedback_query(top, tuning.feedback_terms, texts([c.chunk_id for c in top]) if texts else None)
        if vector.indices:
            cands = add_feedback(cands, feedback(vector), rrf_k=tuning.rrf_k, weight=tuning.feedback_weight,
                                 note_ranks=tuning.note_ranks)
    langs = tuned_languages(lists.query_langs, tuning)
    with_notes = bool(lists.notes or lists.notes_lexical)
    if with_notes and tuning.notes_before_slots:
        cands = add_note_lists(cands, lists, tuning, langs)
    if tuning.language_slots and dense:
        cands = language_slots(cands, dense)
    if uses_titles(tuning) and lists.titles:  # after the slots: a name is evidence in any language
        cands = add_title_list(cands, lists.titles, rrf_k=tuning.rrf_k, weight=tuning.title_weight,
                               weight_same=tuning.title_weight_same, query_langs=langs)
    if with_notes and not tuning.notes_before_slots:
        cands = add_note_lists(cands, lists, tuning, langs)
    if tuning.exact_words and lists.rare is not None:
        cands = keep_exact(cands, lists.rare, tuning.exact_rank)
    return cands


def add_note_lists(cands: Sequence[_Cand], lists: CandidateLists, tuning: SearchTuning,
                   query_langs: Mapping[str, float]) -> list[_Cand]:
    """The candidates with the note-level lists' terms `w / (rrf_k + rank)` added to each note's best chunk.

    A note ranks by what it is about (its windows, its fielded BM25 document) and its best chunk is the
    section to cite; a note only these lists found joins with its lead chunk. The BM25 list weighs a note
    by the query's language odds as the chunk list does. Inputs are not changed; sorted, best first.
    """
    out, best = _copies_by_note(cands)
    k = tuning.rrf_k
    for name, points in (("note", lists.notes if tuning.note_weight > 0 else ()),
                         ("note_lexical", lists.notes_lexical)):
        for rank, p in enumerate(points, 1):
            if name == "note":
                w = tuning.note_weight
            else:
                w = payload_weight(p.payload, query_langs, tuning.note_lexical_weight_same,
                                   tuning.note_lexical_weight_other)
            if w <= 0:
                continue
            note = str(p.payload.get("note_id", p.id))
            c = best.get(note)
            if c is None:
                c = best[note] = _new(p, name, 0.0, rank)
                out.append(c)
            c.add(name, w / (k + rank), rank)
    return sorted(out, key=lambda c: -c.score)


def _copies_by_note(cands: Sequence[_Cand]) -> tuple[list[_Cand], dict[str, _Cand]]:
    """Copies of the candidates, best first, and each note's best copy: where a note-level term goes."""
    out = [c.copy() for c in sorted(cands, key=lambda c: -c.score)]
    best: dict[str, _Cand] = {}
    for c in out:
        best.setdefault(str(c.payload.get("note_id", "")), c)
    return out, best


def keep_exact(cands: Sequence[_Cand], rare: RareWord, worst: int) -> list[_Cand]:
    """The candidates with the rare word's chunk at rank `worst` at most (1 when the query is only rare
    words): its score is raised to just above the candidate's now at that rank (the `exact` part)."""
    out = sorted(cands, key=lambda c: -c.score)
    target = 1 if rare.whole_query else max(1, worst)
    at = next((i for i, c in enumerate(out) if c.chunk_id == rare.chunk_id), None)
    if at is None or at < target:
        return list(out)
    above = out[target - 1].score
    moved = out[at].copy()
    moved.add("exact", above + _EPSILON * max(1.0, abs(above)) - moved.score)
    return sorted([*out[:at], moved, *out[at + 1:]], key=lambda c: -c.score)


_EPSILON = 1e-6


def uses_titles(tuning: SearchTuning) -> bool:
    """Whether hybrid search takes the title/alias list (a weight above 0 in either language)."""
    return tuning.title_weight > 0 or tuning.title_weight_same > 0


def close_to_top(dense: Sequence[ScoredPoint], floor: float) -> Sequence[ScoredPoint]:
    """The dense hits whose cosine is at least `floor` × the top hit's (all of them at 0).

    A dense list always returns its N nearest chunks, however far: in a small store a chunk at
    cosine 0.03 behind a top hit at 0.48 still gets an RRF rank, and a note of many such chunks
    gathers a note sum. Below the floor a hit is no evidence.
    """
    if floor <= 0 or not dense or dense[0].score <= 0:
        return dense
    bar = floor * dense[0].score
    return [p for p in dense if p.score >= bar]


def language_slots(cands: Sequence[_Cand], dense: Sequence[ScoredPoint]) -> list[_Cand]:
    """The candidates re-dealt so rank r holds the language the dense list holds at rank r.

    Within a language the fused order stands; a rank whose language has no candidate left, and
    every rank past the dense list, takes the best remaining candidate. The scores stay where they
    were (the r-th best score goes to the chunk at rank r), so the order survives `best_per_note`.
    Inputs are not changed.
    """
    order = sorted(cands, key=lambda c: -c.score)
    scores = [c.score for c in order]
    queues: dict[str, list[_Cand]] = {}
    for c in reversed(order):
        queues.setdefault(str(c.payload.get("lang") or ""), []).append(c)
    taken: set[str] = set()
    out: list[_Cand] = []
    rest = iter(order)
    for rank in range(len(order)):
        pick = None
        if rank < len(dense):
            queue = queues.get(str(dense[rank].payload.get("lang") or ""), [])
            while queue and queue[-1].chunk_id in taken:
                queue.pop()
            pick = queue.pop() if queue else None
        if pick is None:
            pick = next(c for c in rest if c.chunk_id not in taken)
        taken.add(pick.chunk_id)
        dealt = pick.copy()
        if scores[rank] != pick.score:
            dealt.add("slots", scores[rank] - pick.score)
            dealt.ranks["slots"] = rank + 1
        out.append(dealt)
    return out


def feedback_query(top: Sequence[_Cand], terms: int, texts: Mapping[str, str] | None = None) -> SparseVec:
    """A weighted BM25 query from the words of the top chunks (pseudo-relevance feedback).

    Each chunk's text (from `texts` by chunk id when given, else its payload) is encoded as a BM25
    document in its own language (`lexical_document`: that language's stopwords and stemmer, so the
    terms match how the chunk was indexed); the chunk at rank r counts 1/r. The `terms` heaviest terms
    are kept, scaled so the heaviest is 1. Term weights use no IDF: the engine applies it at query time,
    so a word common to the whole corpus still counts little. Empty when the chunks hold no indexable words.
    """
    weights: dict[int, float] = {}
    for rank, c in enumerate(top, 1):
        lang = c.payload.get("lang")
        text = texts.get(c.chunk_id, "") if texts is not None else c.payload.get("text", "")
        doc = lexical_document(str(text), str(lang) if lang else None)
        for index, value in zip(doc.indices, doc.values, strict=True):
            weights[index] = weights.get(index, 0.0) + value / rank
    kept = sorted(weights.items(), key=lambda kv: (-kv[1], kv[0]))[: max(0, terms)]
    if not kept or kept[0][1] <= 0:
        return SparseVec((), ())
    heaviest = kept[0][1]
    kept.sort()
    return SparseVec(tuple(i for i, _ in kept), tuple(w / heaviest for _, w in kept))


def add_title_list(cands: Sequence[_Cand], named: Sequence[NamedNote], *, rrf_k: int, weight: float,
                   weight_same: float | None = None, query_langs: Mapping[str, float] | None = None) -> list[_Cand]:
    """The candidates with the title/alias list's terms `w * share / (rrf_k + 1)` added.

    Every named note stands at rank 1 of the list, its term split by how many notes carry the
    name (`NamedNote.share`): a specific name is strong evidence, a name a whole group of notes
    shares only says the query is about the group, whose notes the content lists then order.
    `w` is `weight` for a chunk in another language than the query and `weight_same` (default:
    `weight`) in the query's language, interpolated by `query_langs` as `language_weight` does
    (no odds, or a chunk of unknown language: `weight_same`). The term goes to the named note's
    best candidate chunk (the one its note is ranked by), so the note rises once rather than once
    per chunk; a named note with no candidate chunk stays out: the list only reorders what a
    content list found, so a title alone never brings in a note none of them matched. Inputs are
    not changed; the result is sorted, best first.
    """
    same = weight if weight_same is None else weight_same
    out, best = _copies_by_note(cands)
    for m in named:
        c = best.get(m.note_id)
        if c is None:
            continue
        part = payload_weight(c.payload, query_langs or {}, same, weight) * m.share / (rrf_k + 1)
        if part > 0:
            c.add("title", part, 1)
    return sorted(out, key=lambda c: -c.score)


def add_feedback(cands: Sequence[_Cand], feedback: Sequence[ScoredPoint], *, rrf_k: int,
                 weight: float, note_ranks: bool = False) -> list[_Cand]:
    """The first-pass candidates with the feedback list's RRF terms `weight / (rrf_k + rank)` added.

    A chunk only the feedback list found joins with its feedback score alone. Inputs are not
    changed; the result is sorted, best first.
    """
    out = {c.chunk_id: c.copy() for c in cands}
    for rank, p in ranked(feedback, note_ranks):
        add_part(out, p, weight / (rrf_k + rank), "feedback", rank)
    return sorted(out.values(), key=lambda c: -c.score)


def add_part(out: dict[str, _Cand], p: ScoredPoint, part: float, via: str, rank: int | None = None) -> None:
    """Add one list's RRF term for `p`: to its candidate, or as a new candidate found by that list alone."""
    c = out.get(p.id)
    if c is None:
        out[p.id] = _new(p, via, part, rank or 0)
    else:
        c.add(via, part, rank)


def title_match(query_words: set[str], title: str) -> float:
    """Share of the title's words (2+ characters, case-folded) that occur in the query."""
    title_words = {w.lower() for w in _WORD.findall(title)}
    if not title_words:
        return 0.0
    return len(title_words & query_words) / len(title_words)


def rrf_fuse(dense: Sequence[ScoredPoint], lexical: Sequence[ScoredPoint],
             query_lang: str | Mapping[str, float] | None, *, rrf_k: int = 60, weight_same: float = 1.0,
             weight_other: float = 1.0, quality: Sequence[ScoredPoint] = (), dense_weight: float = 1.0,
             quality_weight: float = 1.0, note_ranks: bool = False) -> list[_Cand]:
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
    for rank, p in ranked(dense, note_ranks):
        out[p.id] = _new(p, "dense", dense_weight / (rrf_k + rank), rank, p.score)
    for rank, p in ranked(quality, note_ranks):
        add_part(out, p, quality_weight / (rrf_k + rank), E5_VECTOR, rank)
    for rank, p in ranked(lexical, note_ranks):
        w = language_weight(p, probs, weight_same, weight_other)
        add_part(out, p, w / (rrf_k + rank), "lexical", rank)
    return sorted(out.values(), key=lambda c: -c.score)


def language_weight(p: ScoredPoint, probs: Mapping[str, float], same: float, other: float) -> float:
    """A list's weight for a point by its language: `other + (same - other) * P(query in its language)`,
    `same` when either language is unknown (nothing says the match is accidental)."""
    return payload_weight(p.payload, probs, same, other)


def payload_weight(payload: Mapping[str, Any], probs: Mapping[str, float], same: float, other: float) -> float:
    """`language_weight` for a chunk's payload (its `lang`)."""
    lang = payload.get("lang")
    if not probs or not lang:
        return same
    return other + (same - other) * probs.get(str(lang), 0.0)


def ranked(points: Sequence[ScoredPoint], by_note: bool) -> list[tuple[int, ScoredPoint]]:
    """(1-based rank, point) of a list: every point at its position, or with `by_note` each
    note's first point at the note's position among the notes (its later chunks left out)."""
    if not by_note:
        return list(enumerate(points, 1))
    seen: set[str] = set()
    out = []
    for p in points:
        note = str(p.payload.get("note_id", p.id))
        if note not in seen:
            seen.add(note)
            out.append((len(seen), p))
    return out


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
    out = []
    for note, c in best.items():
        c = c.copy()
        if rest.get(note):
            c.add("note_sum", sum_weight * rest[note])
        out.append(c)
    return sorted(out, key=lambda c: -c.score)


def rank_notes(cands: Sequence[_Cand], lists: CandidateLists | None, tuning: SearchTuning,
               sum_weight: float) -> list[_Cand]:
    """One candidate per note (`best_per_note`), the rare word's note kept where `keep_exact` put its chunk:
    a note's other chunks must not lift another note over the one holding the exact word."""
    notes = best_per_note(cands, sum_weight)
    if not (tuning.exact_words and lists is not None and lists.rare is not None):
        return notes
    note = next((str(c.payload.get("note_id", "")) for c in cands if c.chunk_id == lists.rare.chunk_id), None)
    lead = next((c.chunk_id for c in notes if str(c.payload.get("note_id", "")) == note), None)
    if lead is None:
        return notes
    return keep_exact(notes, replace(lists.rare, chunk_id=lead), tuning.exact_rank)


__all__ = [
    "ADJUSTMENTS",
    "LISTS",
    "RARE_CHUNKS",
    "CandidateLists",
    "ChunkTexts",
    "FeedbackSearch",
    "RareWord",
    "SearchTuning",
    "add_feedback",
    "add_note_lists",
    "add_part",
    "add_title_list",
    "after_first_pass",
    "best_per_note",
    "feedback_query",
    "fuse",
    "keep_exact",
    "language_slots",
    "language_weight",
    "payload_weight",
    "query_languages",
    "rank_notes",
    "ranked",
    "rrf_fuse",
    "title_match",
    "tuned_languages",
    "uses_titles",
]
