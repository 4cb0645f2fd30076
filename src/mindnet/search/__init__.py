"""The retrieval stage (R22, R23): dense, lexical and hybrid search, graph expansion, LLM context.

`searcher` runs a query's ranked lists (dense `use`, dense `e5`, BM25) against the store, expands
hits along the graph and returns `Hit` records with everything a citation needs; `fusion` turns
those lists into one score per chunk (language-aware RRF, the e5 list, pseudo-relevance feedback,
per-note aggregation) and is pure, so the benchmarks replay it over cached lists; `filters` turns
`SearchFilters` into the store's `Filter`; `context` fits hits into a token budget with citations;
`results` holds the `Hit` record, fuses several queries' hit lists and cuts snippets.
The names are re-exported here, so `from mindnet.search import Searcher` keeps working.
"""

from ..points import DENSE_VECTOR, E5_VECTOR
from .context import Citation, Context, TokenCounter, build_context, note_fulltexts
from .filters import SearchFilters, check_date
from .fusion import (
    CandidateLists,
    FeedbackSearch,
    SearchTuning,
    add_feedback,
    add_title_list,
    best_per_note,
    feedback_query,
    fuse,
    query_languages,
    rrf_fuse,
    title_match,
)
from .fusion import _Cand as _Cand
from .results import Explanation, Hit, NoteHit, Part, fuse_hits, group_hits, snippet
from .searcher import MODES, Mode, Searcher, names_of, note_names

__all__ = [
    "DENSE_VECTOR",
    "E5_VECTOR",
    "MODES",
    "CandidateLists",
    "Citation",
    "Context",
    "Explanation",
    "FeedbackSearch",
    "Hit",
    "Mode",
    "NoteHit",
    "Part",
    "SearchFilters",
    "SearchTuning",
    "Searcher",
    "TokenCounter",
    "add_feedback",
    "add_title_list",
    "best_per_note",
    "build_context",
    "check_date",
    "feedback_query",
    "fuse",
    "fuse_hits",
    "group_hits",
    "names_of",
    "note_fulltexts",
    "note_names",
    "query_languages",
    "rrf_fuse",
    "snippet",
    "title_match",
]
