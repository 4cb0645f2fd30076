"""What a query will load, started on a thread of its own before the caller imports the rest (issue 26).

A one-off `mindnet search` spends most of its life loading: Python imports, the store's collections,
the USE graphs, the query's tokenizer and the language model. The imports and the store hold
Python's lock, but the file reads and the model loads mostly do not, so they can run on the second
core meanwhile; a plain query needs no sentencepiece at all (`use_fast.QueryTokens`).
`preload_models` starts them; the caller `wait`s before it searches. Everything loaded here is
cached process-wide (`use_fast.prepared_files`, `shared_sessions`, `query_tokens`,
`default_tokenizer`, `language_identifier`), so the search finds it ready, and nothing here changes
what it computes.

This module imports nothing heavy itself: the thread imports what it loads.
"""

from __future__ import annotations

import contextlib
import threading
from pathlib import Path
from typing import Any

from .config import Settings

PRELOAD_THREAD = "mindnet-preload"


class ModelsLoading:
    """The models of one query loading on a daemon thread; `wait` for them before using them."""

    def __init__(self, settings: Settings, query: str | None, tokenizer: bool, vault: Path | None,
                 e5: bool = True) -> None:
        self.settings = settings
        self._query = query
        self._tokenizer = tokenizer
        self._vault = vault
        # The graphs' sessions mostly leave Python's lock free while the query's text models (piece table,
        # language model) mostly hold it: on two threads the one overlaps the other.
        self._threads = [threading.Thread(target=self._load, name=PRELOAD_THREAD, daemon=True),
                         threading.Thread(target=self._load_text, name=f"{PRELOAD_THREAD}-text", daemon=True)]
        if e5 and vault is not None and not settings.qdrant_url:
            self._threads.append(threading.Thread(target=self._load_e5, name=f"{PRELOAD_THREAD}-e5", daemon=True))
        for thread in self._threads:
            thread.start()

    def wait(self) -> None:
        """Until the default model and the query's text models are loaded (or failed: the search then
        loads them itself and reports the error); the e5 model goes on loading, and the search's e5
        list waits for it."""
        self._threads[0].join()
        self._threads[1].join()

    def finish(self) -> None:
        """Until every load has ended. A process must not exit while a load runs: the interpreter would
        stop the thread inside onnxruntime's or sentencepiece's C++, which aborts the process."""
        for thread in self._threads:
            thread.join()

    def _load_e5(self) -> None:
        """The e5 model, when the store holds its vectors and its files are ready, so that it loads
        beside everything else (a one-off search asks for it only with `quality_tier = true`, the only
        case it uses it in, `api.Index(short_lived=True)`; a resident always)."""
        with contextlib.suppress(Exception):
            if self.settings.model == "e5" or self._vault is None or not _holds_e5(self._vault, self.settings):
                return
            from .embedding import make_embedder
            from .quality_tier import E5_MODEL, e5_available

            if not e5_available():
                return

            model: Any = make_embedder(E5_MODEL, self.settings.threads, self.settings.cache_dir)
            if model.prepared():
                model.prepare()  # the engine is kept for the process (`e5_fast.shared_engine`)

    def _load(self) -> None:
        """The default model's onnx sessions."""
        with contextlib.suppress(Exception):
            if self.settings.model == "use":
                from .embedding import QUERY_THREADS, use_engine_available
                from .use_fast import SENTENCES_FILE, VOCAB_FILE, default_weights_path, prepared_files, shared_sessions

                if use_engine_available():
                    files = prepared_files(default_weights_path(), self.settings.cache_dir)
                    shared_sessions((files[VOCAB_FILE], files[SENTENCES_FILE]), QUERY_THREADS)

    def _load_text(self) -> None:
        """The query's text models: its piece ids (the kept table, or sentencepiece where the query is not
        plain or the onnx engine is missing) and the language model."""
        with contextlib.suppress(Exception):
            use_onnx = False
            if self.settings.model == "use":
                from .embedding import use_engine_available

                use_onnx = use_engine_available()
            plain = use_onnx and self._plain_query()
            if self._tokenizer or (self._query is not None and not plain) or not use_onnx:
                from .chunking.tokens import default_tokenizer

                default_tokenizer()
            if len(self.settings.languages) > 1:
                from .language import language_identifier

                language_identifier(tuple(self.settings.languages), self.settings.cache_dir)

    def _plain_query(self) -> bool:
        """Whether the query's ids come from the kept piece table (`use_fast.QueryTokens`), which loads
        here; else sentencepiece does. Without a query (a server's first) the table loads all the same."""
        from .use_fast import query_tokens

        tokens = query_tokens(self.settings.cache_dir)
        return self._query is not None and tokens is not None and tokens.ids(self._query) is not None


def preload_models(settings: Settings, query: str | None = None, *, tokenizer: bool = False,
                   vault: Path | None = None, e5: bool = True) -> ModelsLoading:
    """Start loading what a search for `query` with `settings` needs (see the module docstring).

    Args:
        query: the query, when known (a one-off search): sentencepiece then loads only if it is not
            plain; without one (a resident's future queries) the piece table loads and sentencepiece not.
        tokenizer: load sentencepiece even for a plain query (a context counts tokens with it, an
            import chunks with it).
        vault: the vault searched: its store says whether the e5 model is needed too.
        e5: False for a caller that never needs the e5 model (an import without the tier).
    """
    return ModelsLoading(settings, query, tokenizer, vault, e5)


def _holds_e5(vault: Path, settings: Settings) -> bool:
    """Whether the vault's embedded store records e5 vectors: its schema record read as JSON, without
    importing the store (where `store.EdgeStore` and `api.Index.has_store` keep it). A guess only: the
    search checks the schema itself."""
    import json

    from .config import store_dir

    record = store_dir(vault, settings) / "qdrant" / f"{settings.collection_prefix}.meta.json"
    try:
        return "e5" in json.loads(record.read_text(encoding="utf-8")).get("vectors", {})
    except (OSError, ValueError, AttributeError):
        return False
