"""What a query will load, started on a thread of its own before the caller imports the rest (issue 26).

A one-off `mindnet search` spends most of its life loading: Python imports, the store's collections,
the sentencepiece model, the USE graphs and the language model. The imports and the store hold
Python's lock, but the tokenizer load and the file reads do not, so they can run on the second core
meanwhile. `preload_models` starts them; the caller `wait`s before it searches. Everything loaded here
is cached process-wide (`default_tokenizer`, `use_fast.prepared_files`, `language_identifier`), so the
search finds it ready, and nothing here changes what it computes.

This module imports nothing heavy itself: the thread imports what it loads.
"""

from __future__ import annotations

import contextlib
import threading

from .config import Settings

PRELOAD_THREAD = "mindnet-preload"


class ModelsLoading:
    """The models of one query loading on a daemon thread; `wait` for them before using them."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self._thread = threading.Thread(target=self._load, name=PRELOAD_THREAD, daemon=True)
        self._thread.start()

    def wait(self) -> None:
        """Until everything is loaded (or failed: the search then loads it itself and reports the error)."""
        self._thread.join()

    def _load(self) -> None:
        with contextlib.suppress(Exception):
            from .chunking.tokens import default_tokenizer

            default_tokenizer()
            if self.settings.model == "use":
                from .embedding import QUERY_THREADS, use_engine_available
                from .use_fast import SENTENCES_FILE, VOCAB_FILE, default_weights_path, prepared_files, shared_sessions

                if use_engine_available():
                    files = prepared_files(default_weights_path(), self.settings.cache_dir)
                    shared_sessions((files[VOCAB_FILE], files[SENTENCES_FILE]), QUERY_THREADS)
            if len(self.settings.languages) > 1:
                from .language import language_identifier

                language_identifier(tuple(self.settings.languages), self.settings.cache_dir)


def preload_models(settings: Settings) -> ModelsLoading:
    """Start loading what a search with `settings` needs (see the module docstring)."""
    return ModelsLoading(settings)
