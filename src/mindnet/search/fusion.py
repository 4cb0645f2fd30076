"""How candidate lists become scores (R22): the hybrid ranking, pure, no store I/O.

`Searcher` (in `searcher`) fetches the lists from the store; everything here turns them into one
ranking, so `bench/search.py` can replay it over cached lists with other settings.

Hybrid search (the default mode) fuses the dense and lexical lists with Reciprocal Rank Fusion
**in Python, by language**. BM25 only matches words, so for a German query against an English
chunk the lexical list holds mostly accidental matches (names, numbers, stems that happen to
collide) and pulls good dense hits down. A lexical rank counts
`other + (same - other) * P(query is in the chunk's language)` (`SearchTuning`: same 1.5, other
0.25, rrf_k 10), the probability from the language model, so a short keyword or syntax query
whose language is a coin toss keeps its exact matches. With `by_note` a note also gains 0.05 x
the scores of its other chunks. `language_fusion=False` uses the engine's RRF instead.

When the store holds the quality tier (the `e5` vector, multilingual-e5-small, filled after the
import) and the e5 model can be loaded, hybrid adds a third list: dense search on `e5` with the
e5 query vector, fused with weight `SearchTuning.e5_weight` (and `use_weight_with_e5` for the
`use` list). Chunks still lacking `e5` are simply absent from that list, so a half-filled tier
is correct by construction; a store without it searches exactly as before.

A fourth list gives a question lexical evidence in the notes' own words: **pseudo-relevance
feedback**. The words of the first-pass top 5 chunks (`feedback_query`, each chunk encoded in
its own language) are searched with BM25 once more and fused with weight 0.5
(`feedback_weight`); it costs one sparse store query per hybrid search.

Last, **language slots** (`language_slots`): the fused ranking is re-dealt so that each rank
holds the language the dense list holds there. In a mixed vault BM25 can only match the
question's language, so without slots it lifts every same-language chunk above the other
language's answer; with them lexical evidence reorders each language among itself.

After the slots, the **title/alias list** (`title_weight`): a note whose title or alias the
question contains as whole words gains one RRF-like term on its best chunk, split by how many
notes carry that name (`mindnet.titles`) and weighed by how likely the note is in another language
than the question, since in the question's own language BM25 has already counted the name's words.
It is what brings the English note "Chunking" up for "Wie funktioniert das Chunking von Notizen?".

Every default is what `bench/search.py loo` picks out of sample (see `SearchTuning`).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, TypeAlias

from ..language import language_identifier
from ..points import E5_VECTOR
from ..store import ScoredPoint, SparseVec, lexical_document
from ..titles import NamedNote


@dataclass(frozen=True, slots=True)
class SearchTuning:
    """Knobs of fusion and expansion; the defaults are what `bench/search.py loo` picks.

    `loo --representation base` replays 270 settings over 12 (question set, direction) cells
    (foam-docs, the Rust book in German, English and a mixed vault, XQuAD-R, all four language
    directions) with the default representation (strict BM25 query, measured BM25 shape) and picks
    by the leximin of the margins over each cell's best single list, counted in whole questions
    (`bench/cells.question_margin`), then the mean; leaving any one cell out, all 12 folds pick
    exactly these defaults (rrf_k 10, same 1.25, feedback 0.5, language slots on, the title/alias
    list across languages), so no cell chose its own figure. The older per-knob notes below
    describe how each knob was first measured, on the two golden sets."""

    rrf_k: int = 10
    """RRF constant: small, so the top of each list counts far more than its tail (5, 10, 20 in
    `loo`; 40 and 60 never won in `grid`)."""
    candidates: int = 50
    """Candidates per list before fusion (at least `4 * k` are taken)."""
    lexical_weight_same: float = 1.25
    """Weight of a lexical rank when the chunk is in the query's language: above 1, because an
    exact word match in the reader's language is the strongest evidence a keyword or syntax
    query has (foam-docs keyword: BM25 alone 0.961 nDCG@5, dense 0.802). The grid (1440 settings,
    rrf_k x weights x confidence x title boost x note sum) kept the settings whose worst nDCG@5
    margin over the better baseline, across all 7 categories of foam-docs and rustbook-de, is
    highest, and among those the best mean: rrf_k=5, 1.5, 0.25, confidence on, no title boost,
    note sum 0.05. With the strict query and the measured BM25 shape, BM25 alone is stronger
    (`loo` mean 0.673 -> 0.745) and `loo` settles on 1.25."""
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
    title_weight: float = 1.0
    """Weight of the title/alias list (`mindnet.titles`) for a note in another language than the
    query: the notes one of whose names (title or alias) the query contains as whole words. A
    named note's best candidate chunk gains `w * share / (rrf_k + 1)`, `share` being 1 / the
    number of notes carrying the name and `w = title_weight_same + (title_weight -
    title_weight_same) * (1 - P(query in the chunk's language))`, the language odds as for the
    lexical weight: a name only one note has counts like rank 1 of a list as heavy as the dense
    one, a name five paragraphs of one article share a fifth for each. 0 (with
    `title_weight_same` 0) leaves the list out (hybrid only).

    Why across languages only: in the query's language BM25 has already matched the name's words
    and weighed them by their IDF, so the list would count them twice; across languages the
    language weight mutes BM25's match as likely accidental (0.25), and a name, the author's own
    word for the topic whatever the note's language ("Chunking" in a German question), is not.
    `bench/search.py loo` (weights 0.5/1/2 across x 0/0.5/1 same, and off, at the other defaults):
    the only cell any of them changes is foam en->en, +0.005 nDCG@5 with same 0 against +0.003
    with same 0.5 or 1 (short keyword queries are a coin toss between the languages, so a name
    there counts about half), so 11 of 12 folds pick same 0; the cross-language weights 0.5, 1
    and 2 tie on every cell (1: a named note counts like rank 1 of a list as heavy as the dense
    one). Out of sample: foam en->en 0.863 -> 0.868, no other cell changes (the fold holding out
    foam en->en sees only ties). With the share, XQuAD no longer pays for its shared article
    titles (the plain list, weight 1 in both languages without shares, cost it up to 0.027). On
    the sample vault nDCG@5 goes 0.831 -> 0.857 and the concept note "Chunking" from note rank 6
    to 3 for the README's question; that figure is in sample: the vault was looked at while the
    list was designed (the `area`/`project` groups of `mindnet.titles` come from its question on
    who reviews mindnet, which the hub note "mindnet" would otherwise take)."""
    title_weight_same: float = 0.0
    """Weight of the title/alias list for a note in the query's language (see `title_weight`)."""
    note_sum_weight: float = 0.05
    """With `by_note`, a note scores its best chunk plus this times the sum of its other chunks'
    scores among the candidates: a note matching in several places ranks above a one-off match."""
    note_ranks: bool = False
    """Rank each list by notes, not chunks: a note's first chunk in a list counts at the note's
    rank among that list's notes, its later chunks not at all. With chunk ranks, five chunks of
    one section fill ranks 1-5 of the BM25 list and push the second note to rank 6, so fusion
    rewards a note for being cut into many chunks. With `note_sum_weight=1` the note's score is
    then one RRF term per list: fusion over notes, the chunk shown being the note's best."""
    e5_weight: float = 0.5
    """Weight of a rank in the `e5` list (quality tier) in hybrid fusion; 0 leaves the list out
    (and skips the e5 query embedding). Only used when the store holds `e5` vectors.

    Chosen by `bench/search.py loo --e5` with the other knobs at their defaults: leaving any one
    of the 12 cells out, 11 folds pick e5 0.5 with the `use` list at 1.0 (among e5 0.5/1/2 x use
    0.5/1). Out of sample it lifts mean nDCG@5 from 0.896 to 0.913: same-language questions
    +0.017, cross-lingual +0.026 (rust de->en +0.045, XQuAD de->en +0.035), the mixed vault
    +0.002; the worst cell is XQuAD en->en, -0.007. e5 alone is weak across languages (German
    questions on foam's English notes: 0.420 against 0.718 for `use`), so it joins at half weight."""
    use_weight_with_e5: float = 1.0
    """Weight of a rank in the `use` list when the `e5` list takes part (1.0 without it)."""
    feedback_weight: float = 0.5
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
    dense_floor: float = 0.25
    """Dense hits below this share of the top hit's cosine take no part (`close_to_top`); 0 keeps all.
    A guard for small stores, not a tuned knob: at 0.25 not one of the 12 `loo` cells changes
    (every one of their top-50 hits is above it; 0.5 and 0.7 cost up to 0.03 there), while on the
    12-question sample vault it keeps a note of many near-zero chunks from outranking the one
    real match (nDCG@5 0.797 -> 0.831, dense alone 0.803; that set chose it, so it is in sample)."""
    language_slots: bool = True
    """Keep the dense list's language at every rank: the fused ranking is re-dealt so that rank r
    holds a chunk of the language dense has at rank r, each language's chunks in fused order.
    BM25 can only match words in the question's language, so in a mixed vault it lifts every
    same-language chunk over the other language's, right or wrong; with slots it reorders each
    language among itself and the multilingual dense list decides the mix (issue 15). Out of
    sample it lifts German questions on the mixed Rust book from 0.696 to 0.873 nDCG@5 (dense
    alone 0.824) and costs no monolingual cell."""
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


def fuse(query: str, lists: CandidateLists, tuning: SearchTuning,
         feedback: FeedbackSearch | None = None) -> list[_Cand]:
    """The hybrid ranking: language-aware RRF of the lists, the optional title boost, the
    pseudo-relevance feedback list, the language slots and the title/alias list.

    Pure but for `feedback`, so the bench can replay it over cached lists with other settings. The
    e5 list counts only when it is non-empty and `e5_weight > 0`; then the `use` list weighs
    `use_weight_with_e5`. With `feedback` given and `feedback_weight > 0`, the words of the
    first-pass top `feedback_docs` chunks (`feedback_query`) are searched with `feedback` and that
    list is fused in with `feedback_weight` (`add_feedback`). Then the language slots re-deal the
    ranking (`language_slots`), and the title/alias list comes last, so a note named in the
    question can rise across languages.
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
            c.score += scale * title_match(words, str(c.payload.get("note_title", "")))
        cands.sort(key=lambda c: -c.score)
    return after_first_pass(cands, lists, dense, tuning, feedback)


def tuned_languages(query_langs: Mapping[str, float], tuning: SearchTuning) -> Mapping[str, float]:
    """The query's language odds as fusion uses them: the odds, or the hard guess without confidence."""
    if not tuning.language_confidence and query_langs:
        return {max(query_langs, key=lambda lang: query_langs[lang]): 1.0}
    return query_langs


def after_first_pass(cands: list[_Cand], lists: CandidateLists, dense: Sequence[ScoredPoint], tuning: SearchTuning,
                     feedback: FeedbackSearch | None) -> list[_Cand]:
    """What follows the RRF first pass (`cands`, best first): the feedback list, the language slots
    over `dense` (the dense list after its floor), then the title/alias list."""
    if feedback is not None and tuning.feedback_weight > 0 and tuning.feedback_docs > 0:
        vector = feedback_query(cands[: tuning.feedback_docs], tuning.feedback_terms)
        if vector.indices:
            cands = add_feedback(cands, feedback(vector), rrf_k=tuning.rrf_k, weight=tuning.feedback_weight,
                                 note_ranks=tuning.note_ranks)
    if tuning.language_slots and dense:
        cands = language_slots(cands, dense)
    if uses_titles(tuning) and lists.titles:  # after the slots: a name is evidence in any language
        cands = add_title_list(cands, lists.titles, rrf_k=tuning.rrf_k, weight=tuning.title_weight,
                               weight_same=tuning.title_weight_same,
                               query_langs=tuned_languages(lists.query_langs, tuning))
    return cands


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
        out.append(replace(pick, score=scores[rank]))
    return out


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
    out = [replace(c) for c in sorted(cands, key=lambda c: -c.score)]
    best: dict[str, _Cand] = {}
    for c in out:
        best.setdefault(str(c.payload.get("note_id", "")), c)
    for m in named:
        c = best.get(m.note_id)
        if c is None:
            continue
        part = payload_weight(c.payload, query_langs or {}, same, weight) * m.share / (rrf_k + 1)
        if part > 0:
            c.score += part
            c.via = f"{c.via}+title"
    return sorted(out, key=lambda c: -c.score)


def add_feedback(cands: Sequence[_Cand], feedback: Sequence[ScoredPoint], *, rrf_k: int,
                 weight: float, note_ranks: bool = False) -> list[_Cand]:
    """The first-pass candidates with the feedback list's RRF terms `weight / (rrf_k + rank)` added.

    A chunk only the feedback list found joins with its feedback score alone. Inputs are not
    changed; the result is sorted, best first.
    """
    out = {c.chunk_id: replace(c) for c in cands}
    for rank, p in ranked(feedback, note_ranks):
        add_part(out, p, weight / (rrf_k + rank), "feedback")
    return sorted(out.values(), key=lambda c: -c.score)


def add_part(out: dict[str, _Cand], p: ScoredPoint, part: float, via: str) -> None:
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
        out[p.id] = _Cand(p.id, dense_weight / (rrf_k + rank), p.payload, "dense", p.score)
    for rank, p in ranked(quality, note_ranks):
        add_part(out, p, quality_weight / (rrf_k + rank), E5_VECTOR)
    for rank, p in ranked(lexical, note_ranks):
        w = language_weight(p, probs, weight_same, weight_other)
        add_part(out, p, w / (rrf_k + rank), "lexical")
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
    out = [replace(c, score=c.score + sum_weight * rest.get(note, 0.0)) for note, c in best.items()]
    return sorted(out, key=lambda c: -c.score)


__all__ = [
    "CandidateLists",
    "FeedbackSearch",
    "SearchTuning",
    "add_feedback",
    "add_part",
    "add_title_list",
    "after_first_pass",
    "best_per_note",
    "feedback_query",
    "fuse",
    "language_slots",
    "language_weight",
    "payload_weight",
    "query_languages",
    "ranked",
    "rrf_fuse",
    "title_match",
    "tuned_languages",
    "uses_titles",
]
