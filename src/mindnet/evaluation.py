"""`mindnet eval` (R28): retrieval quality of a store on a question set, ranked per note.

Two inputs:

* **BEIR layout**: `corpus.jsonl` (`_id`, `title`, `text`), `queries.jsonl` (`_id`, `text`),
  `qrels.tsv` (`query-id corpus-id score`, header line). Every document becomes one Markdown note
  (title as H1) in a temporary vault, imported with the real pipeline (`import_vault`), so the
  figures measure what a user's vault would get: chunking, title prefix, BM25 input and all.
* **Vault + queries file** (JSONL): `query`, `relevant` (note ids or vault-relative paths),
  optional `partial` (same), optional `category`, optional `id`.

Ranking is per note (`Searcher.search(by_note=True)`): a question is answered by a note, and a
note found through three chunks must count once. Gains: 1 for relevant, 0.5 for partial (BEIR:
the qrels score). A result counts as a *hit* for MRR, Hit@1 and Recall only when it is relevant
(gain >= 1): a partial answer helps nDCG but is not "the" answer.

Every run of `DEFAULT_RUNS` is measured in the same process on the same questions, including a
plain baseline the issue asks for: BM25 alone, and the same model over **fixed 300-token windows**
(`fixed_windows`: consecutive windows of the model's tokens over each note's `fulltext`, no
structure, no overlap, no title prefix), imported into a separate store beside the real one. It
exists only here, not as a user-facing chunking strategy: it answers "what does the structure
buy?", nothing else.

Cross-lingual BEIR: `load_beir(corpus_folder, queries_from=other_folder)` asks one folder's
questions against another folder's corpus, the two corpora being parallel (same documents in the
same order, as XQuAD's `beir/de` and `beir/en`), so judgements carry over by position.

The metric functions are pure and tested with hand-computed values.
"""

from __future__ import annotations

import csv
import json
import math
import statistics
import tempfile
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Literal

from .api import Index
from .chunking.base import Chunk
from .chunking.tokens import Tokenizer, default_tokenizer
from .config import Settings
from .embedding import CachedEmbedder, Embedder, EmbeddingCache
from .errors import InputError, MindnetError, VaultNotFoundError
from .points import DENSE_VECTOR, E5_VECTOR, chunk_point
from .search import Hit, Mode, Searcher, SearchTuning
from .store import CHUNK_BM25, PointRecord, Store, StoreSchema, VectorSpec, shape_fingerprint
from .store import open_store as open_store_at
from .sync import store_dir
from .text import content_hash, line_starts
from .vault import Note, file_line, read_vault

RELEVANT = 1.0
"""Gain of a relevant note, and the threshold for counting a result as a hit."""
PARTIAL = 0.5
"""Gain of a partially relevant note."""


# ---------------------------------------------------------------------------------------------
# Metrics (pure)
# ---------------------------------------------------------------------------------------------


def dcg(gains: Sequence[float]) -> float:
    """Discounted cumulative gain of gains in rank order: sum of g_i / log2(i + 1), i 1-based."""
    return sum(g / math.log2(i + 1) for i, g in enumerate(gains, 1))


def ndcg_at_k(ranked: Sequence[str], gains: Mapping[str, float], k: int) -> float:
    """nDCG@k: DCG of the top k over the DCG of the ideal order of all judged gains.

    A document ranked twice counts once (its first position). 0.0 when nothing is judged.
    """
    ideal = dcg(sorted((g for g in gains.values() if g > 0), reverse=True)[:k])
    if ideal <= 0:
        return 0.0
    return dcg([gains.get(d, 0.0) for d in _unique(ranked)[:k]]) / ideal


def recall_at_k(ranked: Sequence[str], gains: Mapping[str, float], k: int) -> float:
    """Share of the relevant (gain >= 1) documents found in the top k; 0.0 when none is relevant."""
    relevant = {d for d, g in gains.items() if g >= RELEVANT}
    if not relevant:
        return 0.0
    return len(relevant & set(_unique(ranked)[:k])) / len(relevant)


def reciprocal_rank(ranked: Sequence[str], gains: Mapping[str, float], k: int | None = None) -> float:
    """1 / rank of the first relevant (gain >= 1) document within the top k (all when None), else 0."""
    for i, d in enumerate(_unique(ranked)[:k], 1):
        if gains.get(d, 0.0) >= RELEVANT:
            return 1.0 / i
    return 0.0


def hit_at_1(ranked: Sequence[str], gains: Mapping[str, float]) -> float:
    """1.0 when the first result is relevant (gain >= 1), else 0.0."""
    return 1.0 if reciprocal_rank(ranked, gains, 1) == 1.0 else 0.0


def _unique(ranked: Sequence[str]) -> list[str]:
    return list(dict.fromkeys(ranked))


@dataclass(frozen=True, slots=True)
class Metrics:
    """Mean metrics over a set of queries."""

    n: int
    """Queries averaged."""
    ndcg_5: float
    ndcg_10: float
    recall_10: float
    mrr: float
    """MRR@10."""
    hit_1: float


def score_query(ranked: Sequence[str], gains: Mapping[str, float]) -> Metrics:
    """Every metric of one ranked list (n=1)."""
    return Metrics(1, ndcg_at_k(ranked, gains, 5), ndcg_at_k(ranked, gains, 10), recall_at_k(ranked, gains, 10),
                   reciprocal_rank(ranked, gains, 10), hit_at_1(ranked, gains))


def mean_metrics(per_query: Iterable[Metrics]) -> Metrics:
    """Macro average (every query weighs the same)."""
    items = list(per_query)
    if not items:
        return Metrics(0, 0.0, 0.0, 0.0, 0.0, 0.0)

    def avg(name: str) -> float:
        return sum(getattr(m, name) for m in items) / len(items)

    return Metrics(len(items), avg("ndcg_5"), avg("ndcg_10"), avg("recall_10"), avg("mrr"), avg("hit_1"))


# ---------------------------------------------------------------------------------------------
# Question sets
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class EvalQuery:
    """One question with its judgements, keyed the way the ranking is keyed (note id or doc id)."""

    query_id: str
    query: str
    gains: Mapping[str, float]
    """Document key -> gain (1 relevant, 0.5 partial)."""
    category: str | None = None


@dataclass(frozen=True, slots=True)
class RawQuery:
    """A line of a vault queries file, before its note references are resolved."""

    query_id: str
    query: str
    relevant: tuple[str, ...]
    partial: tuple[str, ...] = ()
    category: str | None = None


def load_vault_queries(path: str | Path) -> list[RawQuery]:
    """Read a JSONL queries file (`query`, `relevant`, optional `partial`, `category`, `id`).

    Raises:
        MindnetError: bad JSON or a line without `query` or `relevant`, naming file and line.
    """
    out: list[RawQuery] = []
    for line_no, line in _lines(Path(path), "queries file"):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
            query = str(row["query"])
            relevant = _as_tuple(row["relevant"])
        except (ValueError, KeyError, TypeError, IndexError) as exc:
            raise InputError(str(path), f"need a JSON object with 'query' and 'relevant' ({exc})", line_no) from None
        if not relevant:
            raise InputError(str(path), "'relevant' is empty; every question needs an answer", line_no)
        out.append(RawQuery(str(row.get("id") or f"q{line_no}"), query, relevant, _as_tuple(row.get("partial")),
                            row.get("category")))
    return out


def _as_tuple(value: object) -> tuple[str, ...]:
    if value is None:
        return ()
    if isinstance(value, str):
        return (value,)
    if isinstance(value, list | tuple):
        return tuple(str(v) for v in value)
    raise TypeError(f"expected a string or a list, got {value!r}")


def resolve_queries(raw: Sequence[RawQuery], store: Store) -> list[EvalQuery]:
    """Judgements keyed by note id: each reference may be a note id or a vault-relative path.

    Raises:
        MindnetError: a reference that names no note in the store (a typo would silently lower
            every figure).
    """
    by_key: dict[str, str] = {}
    for p in store.scroll("notes"):
        by_key[p.id] = p.id
        path = str(p.payload.get("path", ""))
        by_key[path] = p.id
        by_key.setdefault(path.removesuffix(".md"), p.id)
    out: list[EvalQuery] = []
    missing: list[str] = []
    for q in raw:
        gains: dict[str, float] = {}
        for refs, gain in ((q.partial, PARTIAL), (q.relevant, RELEVANT)):
            for ref in refs:
                note_id = by_key.get(ref) or by_key.get(ref.lstrip("./"))
                if note_id is None:
                    missing.append(f"{q.query_id}: {ref}")
                else:
                    gains[note_id] = max(gains.get(note_id, 0.0), gain)
        out.append(EvalQuery(q.query_id, q.query, gains, q.category))
    if missing:
        raise MindnetError(f"{len(missing)} judged notes are not in the store: {'; '.join(missing[:10])}")
    return out


@dataclass(frozen=True, slots=True)
class BeirDoc:
    doc_id: str
    title: str
    text: str


@dataclass(frozen=True, slots=True)
class BeirSet:
    """A BEIR dataset in memory."""

    corpus: tuple[BeirDoc, ...]
    queries: Mapping[str, str]
    """Query id -> text."""
    qrels: Mapping[str, Mapping[str, float]]
    """Query id -> doc id -> score."""


def load_beir(folder: str | Path, *, qrels_file: str = "qrels.tsv",
              queries_from: str | Path | None = None) -> BeirSet:
    """Read `corpus.jsonl`, `queries.jsonl` and a qrels file (header line, tab-separated).

    Args:
        folder: the BEIR folder whose corpus is searched.
        qrels_file: qrels file name inside the folder that holds the queries.
        queries_from: another BEIR folder whose queries and qrels to use instead (cross-lingual:
            German questions against the English corpus). Its corpus must be parallel to
            `folder`'s (same length, same order); judged document i maps to `folder`'s document i.

    Raises:
        MindnetError: a missing file, naming the BEIR layout it expects, or corpora that are not
            parallel.
    """
    if queries_from is not None:
        asked = load_beir(queries_from, qrels_file=qrels_file)
        searched = load_beir(folder, qrels_file=qrels_file)
        if len(asked.corpus) != len(searched.corpus):
            raise MindnetError(f"{queries_from} and {folder} are not parallel corpora: {len(asked.corpus)} vs "
                               f"{len(searched.corpus)} documents")
        to_searched = {a.doc_id: b.doc_id for a, b in zip(asked.corpus, searched.corpus, strict=True)}
        qrels = {q: {to_searched.get(d, d): g for d, g in rel.items()} for q, rel in asked.qrels.items()}
        return BeirSet(searched.corpus, asked.queries, qrels)
    root = Path(folder)
    for name in ("corpus.jsonl", "queries.jsonl", qrels_file):
        if not (root / name).is_file():
            raise MindnetError(f"{root / name} not found; a BEIR folder holds corpus.jsonl, queries.jsonl, qrels.tsv")
    corpus = tuple(BeirDoc(str(r["_id"]), str(r.get("title") or ""), str(r.get("text") or ""))
                   for r in _jsonl(root / "corpus.jsonl", "_id"))
    queries = {str(r["_id"]): str(r["text"]) for r in _jsonl(root / "queries.jsonl", "_id", "text")}
    return BeirSet(corpus, queries, _qrels(root / qrels_file))


def _lines(path: Path, what: str) -> Iterator[tuple[int, str]]:
    """(1-based line number, text) of a UTF-8 file; a missing file or a bad byte is a one-line error.

    Decoding line by line is what lets a bad byte be reported with its line, not as a traceback.
    """
    try:
        with path.open("rb") as fh:
            for line_no, raw in enumerate(fh, 1):
                try:
                    yield line_no, raw.decode("utf-8").rstrip("\r\n")
                except UnicodeDecodeError as exc:
                    raise InputError(str(path), f"invalid UTF-8 (byte 0x{raw[exc.start]:02x})", line_no) from None
    except FileNotFoundError:
        raise InputError(str(path), f"{what} not found") from None
    except IsADirectoryError:
        raise InputError(str(path), f"{what} is a folder, not a file") from None
    except OSError as exc:
        raise InputError(str(path), f"cannot read {what}: {exc.strerror or exc}") from None


def _jsonl(path: Path, *required: str) -> Iterator[dict[str, object]]:
    """The JSON objects of a BEIR JSONL file; a line that is no object or lacks a key names file and line."""
    for line_no, line in _lines(path, "BEIR file"):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except ValueError as exc:
            raise InputError(str(path), f"invalid JSON: {exc}", line_no) from None
        if not isinstance(row, dict):
            raise InputError(str(path), f"need a JSON object, got {type(row).__name__}", line_no)
        missing = [key for key in required if key not in row]
        if missing:
            raise InputError(str(path), f"missing {', '.join(repr(k) for k in missing)}", line_no)
        yield row


def _qrels(path: Path) -> dict[str, dict[str, float]]:
    """`query-id <TAB> corpus-id <TAB> score` rows; an optional header first, blank lines ignored."""
    qrels: dict[str, dict[str, float]] = {}
    for line_no, line in _lines(path, "qrels file"):
        if not line.strip():
            continue
        row = next(csv.reader([line], delimiter="\t"))
        if line_no == 1 and not _is_number(row[-1]):
            continue  # the `query-id corpus-id score` header
        if len(row) < 3 or not _is_number(row[2]):
            raise InputError(str(path), f"need 'query-id<TAB>corpus-id<TAB>score', got {line[:80]!r}", line_no)
        qrels.setdefault(row[0], {})[row[1]] = float(row[2])
    return qrels


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def write_beir_vault(beir: BeirSet, folder: str | Path) -> dict[str, str]:
    """Write each document as `<n>.md` with its title as H1; return note path -> doc id.

    File names are numbers, not doc ids, so any id (slashes, unicode, case twins) is safe; the
    returned map translates results back. Frontmatter `type: source` picks the profile of
    reference texts and `id` keeps note ids readable in debug output.
    """
    root = Path(folder)
    root.mkdir(parents=True, exist_ok=True)
    width = len(str(len(beir.corpus)))
    paths: dict[str, str] = {}
    for i, doc in enumerate(beir.corpus, 1):
        name = f"{i:0{width}d}.md"
        title = doc.title.strip() or doc.doc_id
        head = f"---\nid: {json.dumps(f'doc-{i:0{width}d}')}\ntitle: {json.dumps(title)}\ntype: source\n---\n"
        (root / name).write_text(f"{head}\n# {title}\n\n{doc.text.strip()}\n", encoding="utf-8")
        paths[name] = doc.doc_id
    return paths


def beir_queries(beir: BeirSet) -> list[EvalQuery]:
    """Queries that have at least one positive judgement, keyed by doc id."""
    out = []
    for qid, text in beir.queries.items():
        gains = {d: s for d, s in beir.qrels.get(qid, {}).items() if s > 0}
        if gains:
            out.append(EvalQuery(qid, text, gains))
    return out


# ---------------------------------------------------------------------------------------------
# Running
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class RunConfig:
    """One way of searching to evaluate."""

    mode: Mode = "hybrid"
    expand: bool = False
    tuning: SearchTuning | None = None
    label: str = ""
    """Name in the table; defaults to `mode` (+ `+expand`, `fixed-300 `)."""
    chunker: Literal["structure", "fixed"] = "structure"
    """`structure`: the real import. `fixed`: the fixed-window baseline store (`fixed_windows`)."""
    dense_vector: str = DENSE_VECTOR
    """The vector `dense` mode searches: `use`, or `e5` (the quality tier, searched with its own
    model) to measure the tier alone."""

    @property
    def name(self) -> str:
        if self.label:
            return self.label
        name = f"{self.mode}+expand" if self.expand else self.mode
        return f"{name} (fixed {FIXED_WINDOW_TOKENS}-token windows)" if self.chunker == "fixed" else name


FIXED_WINDOW_TOKENS = 300
"""Window size of the plain baseline, in the embedding model's tokens."""

DEFAULT_RUNS: tuple[RunConfig, ...] = (
    RunConfig("lexical", chunker="fixed", label="baseline: bm25 (fixed windows)"),
    RunConfig("dense", chunker="fixed", label="baseline: dense (fixed windows)"),
    RunConfig("lexical", label="lexical (bm25)"),
    RunConfig("dense"),
    RunConfig("hybrid", label="hybrid (default)"),
    RunConfig("hybrid", expand=True),
)
"""The plain baselines first (BM25 alone and the same model over fixed 300-token windows, no
structure, no title), then the four modes over the real import. `lexical (bm25)` is BM25 alone
too, over structure chunks whose BM25 input also holds the title and section path."""


@dataclass(frozen=True, slots=True)
class QueryResult:
    query_id: str
    category: str | None
    ranked: tuple[str, ...]
    metrics: Metrics
    seconds: float


@dataclass(frozen=True, slots=True)
class EvalReport:
    """Figures of one run over one question set; `--json` prints `dataclasses.asdict` of it."""

    dataset: str
    run: str
    overall: Metrics
    per_category: dict[str, Metrics]
    latency_ms_median: float
    """Median wall time of one search (query embedding + search), milliseconds."""
    latency_ms_p95: float
    queries: tuple[QueryResult, ...] = field(default=(), repr=False)


KeyOf = Callable[[Hit], str]


def evaluate(searcher: Searcher, queries: Sequence[EvalQuery], run: RunConfig, *, dataset: str = "",
             k: int = 10, key: KeyOf | None = None) -> EvalReport:
    """Run every query once, ranked per note, and average the metrics.

    Args:
        searcher: over the store holding the judged notes.
        queries: judgements keyed like `key` (note ids by default).
        run: mode, expansion and tuning.
        dataset: name for the report.
        k: results per query (metrics look at the top 10 at most).
        key: maps a hit to the judgement key; `hit.note_id` by default.
    """
    key = key or (lambda h: h.note_id)
    # The given searcher's e5 model (loaded at most once for all runs), or None without the tier.
    quality = searcher.quality_embedder()
    embedder, vector = searcher.embedder, searcher.dense_vector
    if run.dense_vector != DENSE_VECTOR:
        if run.dense_vector != E5_VECTOR or quality is None:
            raise MindnetError(f"run {run.name!r} searches {run.dense_vector!r}, which this store does not hold "
                               "with a loadable model (fill the quality tier: `mindnet embed`)")
        embedder, vector = quality, run.dense_vector
    searcher = Searcher(searcher.store, embedder, searcher.settings, tuning=run.tuning or searcher.tuning,
                        dense_vector=vector, quality=quality)
    if queries:  # warm-up: model load and first-query caches are not what a user waits for per query
        searcher.search(queries[0].query, k=k, mode=run.mode, expand=run.expand, by_note=True)
    results: list[QueryResult] = []
    for q in queries:
        started = time.perf_counter()
        hits = searcher.search(q.query, k=k, mode=run.mode, expand=run.expand, by_note=True)
        seconds = time.perf_counter() - started
        ranked = tuple(key(h) for h in hits)
        results.append(QueryResult(q.query_id, q.category, ranked, score_query(ranked, q.gains), seconds))
    categories = sorted({r.category for r in results if r.category})
    per_category = {c: mean_metrics(r.metrics for r in results if r.category == c) for c in categories}
    times = sorted(r.seconds * 1000 for r in results) or [0.0]
    return EvalReport(dataset, run.name, mean_metrics(r.metrics for r in results), per_category,
                      statistics.median(times), times[min(len(times) - 1, math.ceil(0.95 * len(times)) - 1)],
                      tuple(results))


@contextmanager
def opened(vault: str | Path, settings: Settings, embedder: Embedder | None = None) -> Iterator[Searcher]:
    """A searcher over a vault's store, imported (incrementally) first; closed afterwards.

    The import skips the e5 phase: filling the tier costs minutes per corpus. A store that already
    holds e5 vectors (`mindnet embed`, or an import with the tier) keeps them, and hybrid then
    fuses them as a user's search would.
    """
    with Index(vault, settings, embedder=embedder) as index:
        index.import_vault(e5=False)
        yield index.searcher()


# -- the fixed-window baseline ------------------------------------------------------------------


def fixed_windows(text: str, tokenizer: Tokenizer, size: int = FIXED_WINDOW_TOKENS) -> list[tuple[int, int]]:
    """Char spans of consecutive `size`-token windows tiling `text`: the plain chunker of the baseline.

    Tokens are the embedding model's (`Tokenizer.pieces`), so a window is exactly what the model
    would read; no structure, no overlap. Windows holding only whitespace are dropped.
    """
    if size < 1:
        raise MindnetError(f"window size must be at least 1 token, not {size}")
    if not text.strip():
        return []
    pieces = tokenizer.pieces(text)
    spans = [(pieces[i][0], pieces[min(i + size, len(pieces)) - 1][1]) for i in range(0, len(pieces), size)]
    return [(a, b) for a, b in spans if text[a:b].strip()]


def _fixed_records(vault: str | Path, settings: Settings, embedder: Embedder,
                   tokenizer: Tokenizer) -> list[PointRecord]:
    """Baseline chunk points of every note: window text embedded and BM25-indexed as is, no title."""
    notes = read_vault(vault, settings).notes
    pending: list[tuple[Chunk, str]] = []
    for note in notes:
        starts = line_starts(note.fulltext)
        for i, (a, b) in enumerate(fixed_windows(note.fulltext, tokenizer), 1):
            pending.append((_window_chunk(note, i, a, b, starts), note.fulltext[a:b]))
    vectors = embedder.embed_passages([text for _, text in pending]) if pending else []
    return [chunk_point(chunk, vec, lexical_text=text) for (chunk, text), vec in zip(pending, vectors, strict=True)]


def _window_chunk(note: Note, i: int, a: int, b: int, starts: list[int]) -> Chunk:
    """Window `i` of a note as a chunk record, so the baseline's payload is built like every other."""
    text = note.fulltext[a:b].strip()
    return Chunk(
        chunk_id=f"{note.note_id}#w{i:04d}", note_id=note.note_id, note_title=note.title, path=note.path,
        type=note.type, area=note.area, project=note.project, tags=note.tags, chunk_index=i - 1,
        char_start=a, char_end=b, content_start=a, line_start=file_line(note, a, starts),
        line_end=file_line(note, max(a, b - 1), starts), token_count=FIXED_WINDOW_TOKENS, section_title="",
        section_path="/", lang=note.lang, text=text, created_at=note.created, oversize=False, has_code=False,
        summary=None, stable_key=content_hash(text), text_hash=content_hash(text),
    )


@contextmanager
def opened_fixed(vault: str | Path, folder: str | Path, settings: Settings,
                 embedder: Embedder) -> Iterator[Searcher]:
    """A searcher over the fixed-window baseline of a vault, in its own Edge store under `folder`.

    Rebuilt only when the vault's notes, the window size or the model changed (a fingerprint file
    beside the store); window embeddings are cached in `folder/embeddings.sqlite`. Always an
    embedded store, even when the real one is a Qdrant server: the baseline is scratch data.
    """
    root = Path(folder)
    root.mkdir(parents=True, exist_ok=True)
    notes = read_vault(vault, settings).notes
    shape = [bm25] if (bm25 := shape_fingerprint(CHUNK_BM25)) else []  # the baseline is BM25 as the import's
    fingerprint = content_hash(json.dumps([FIXED_WINDOW_TOKENS, embedder.model_id, *shape,
                                           sorted((n.note_id, n.content_hash) for n in notes)]))
    mark = root / "fingerprint.txt"
    store = open_store_at(path=root / "qdrant", prefix=settings.collection_prefix)
    cache = EmbeddingCache(root / "embeddings.sqlite")
    try:
        schema = StoreSchema(vectors=(VectorSpec(DENSE_VECTOR, embedder.model_id, embedder.dim),))
        if not mark.is_file() or mark.read_text(encoding="utf-8") != fingerprint:
            mark.unlink(missing_ok=True)
            store.reset(schema)
            records = _fixed_records(vault, settings, CachedEmbedder(embedder, cache), default_tokenizer())
            for start in range(0, len(records), 256):
                store.upsert("chunks", records[start:start + 256])
            store.optimize()
            mark.write_text(fingerprint, encoding="utf-8")
        else:
            store.ensure(schema)
        yield Searcher(store, embedder, settings)
    finally:
        store.close()
        cache.close()


# -- entry points --------------------------------------------------------------------------------


def _evaluate_runs(vault: Path, fixed_folder: Path, settings: Settings, embedder: Embedder | None,
                   runs: Sequence[RunConfig], make_queries: Callable[[Store], list[EvalQuery]], dataset: str,
                   key: KeyOf | None) -> list[EvalReport]:
    """Evaluate the structure runs on the real store and the fixed runs on the baseline store, in run order."""
    reports: dict[int, EvalReport] = {}
    with opened(vault, settings, embedder) as searcher:
        queries = make_queries(searcher.store)
        for i, run in enumerate(runs):
            if run.chunker == "structure":
                reports[i] = evaluate(searcher, queries, run, dataset=dataset, key=key)
        fixed = [i for i, run in enumerate(runs) if run.chunker == "fixed"]
        if fixed:
            with opened_fixed(vault, fixed_folder, settings, searcher.embedder) as baseline:
                for i in fixed:
                    reports[i] = evaluate(baseline, queries, runs[i], dataset=dataset, key=key)
    return [reports[i] for i in range(len(runs))]


def evaluate_vault(vault: str | Path, queries_file: str | Path, settings: Settings,
                   runs: Sequence[RunConfig] = DEFAULT_RUNS, *, embedder: Embedder | None = None,
                   dataset: str | None = None) -> list[EvalReport]:
    """Import a vault (into `settings.store_path` or `VAULT/.mindnet`) and evaluate a queries file.

    The fixed-window baseline (runs with `chunker="fixed"`) lives in `<store folder>/baseline-fixed`.

    Raises:
        MindnetError: an unreadable queries file or a judged note missing from the vault.
    """
    if not Path(vault).is_dir():  # the store folder would be created beside a typo
        raise VaultNotFoundError(str(vault))
    raw = load_vault_queries(queries_file)
    name = dataset or Path(queries_file).stem
    fixed_folder = store_dir(vault, settings) / "baseline-fixed"
    return _evaluate_runs(Path(vault), fixed_folder, settings, embedder, runs,
                          lambda store: resolve_queries(raw, store), name, None)


def evaluate_beir(beir: BeirSet | str | Path, settings: Settings, runs: Sequence[RunConfig] = DEFAULT_RUNS, *,
                  embedder: Embedder | None = None, work_dir: str | Path | None = None,
                  dataset: str = "beir") -> list[EvalReport]:
    """Import a BEIR corpus as notes of a temporary vault and evaluate its queries per document.

    Args:
        beir: a loaded set (see `load_beir` for cross-lingual sets) or a BEIR folder.
        settings: as for an import; `store_path` is replaced by a folder under `work_dir`.
        runs: what to evaluate.
        embedder: injected model (tests, benches); else the configured one with a cache in `work_dir`.
        work_dir: where the vault, the store and the fixed-window baseline go (kept, so a second
            run reuses the embedding cache); a temporary folder, removed afterwards, when None.
        dataset: name for the reports.
    """
    data = beir if isinstance(beir, BeirSet) else load_beir(beir)
    with tempfile.TemporaryDirectory(prefix="mindnet-beir-") as tmp:
        root = Path(work_dir) if work_dir else Path(tmp)
        vault = root / "vault"
        doc_of = write_beir_vault(data, vault)
        stale = {p.name for p in vault.glob("*.md")} - set(doc_of)
        for name in stale:  # a reused work_dir may hold a bigger corpus's notes
            (vault / name).unlink()
        run_settings = replace(settings, store_path=str(root / "store"))
        queries = beir_queries(data)
        return _evaluate_runs(vault, root / "baseline-fixed", run_settings, embedder, runs, lambda _store: queries,
                              dataset, lambda h: doc_of.get(h.path, h.path))


def format_table(reports: Sequence[EvalReport], *, categories: bool = True) -> str:
    """A Markdown table: one row per dataset and run, then per category when there are any."""
    rows = ["| dataset | run | n | nDCG@5 | nDCG@10 | R@10 | MRR | Hit@1 | p50 ms |",
            "|---|---|---|---|---|---|---|---|---|"]
    for r in reports:
        rows.append(_row(r.dataset, r.run, r.overall, r.latency_ms_median))
    if categories:
        for r in reports:
            for cat, m in r.per_category.items():
                rows.append(_row(f"{r.dataset} [{cat}]", r.run, m, None))
    return "\n".join(rows)


def _row(dataset: str, run: str, m: Metrics, p50: float | None) -> str:
    lat = f"{p50:.1f}" if p50 is not None else ""
    return (f"| {dataset} | {run} | {m.n} | {m.ndcg_5:.3f} | {m.ndcg_10:.3f} | {m.recall_10:.3f} | {m.mrr:.3f} | "
            f"{m.hit_1:.3f} | {lat} |")


__all__ = [
    "DEFAULT_RUNS",
    "FIXED_WINDOW_TOKENS",
    "BeirSet",
    "EvalQuery",
    "EvalReport",
    "Metrics",
    "RunConfig",
    "dcg",
    "evaluate",
    "evaluate_beir",
    "evaluate_vault",
    "fixed_windows",
    "format_table",
    "hit_at_1",
    "load_beir",
    "load_vault_queries",
    "ndcg_at_k",
    "recall_at_k",
    "reciprocal_rank",
    "resolve_queries",
]
