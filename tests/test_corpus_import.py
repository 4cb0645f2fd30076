"""Importing the shared corpora with the real model and the real embedded store (issue 6).

The corpora are read-only, so the store lives under tmp_path (`--store`). msdocs (2,905 notes)
is left to `bench/import.py`; these three run in well under a minute together.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from conftest import corpus
from mindnet.api import Index
from mindnet.config import Settings
from mindnet.sync import open_store


@pytest.mark.slow
@pytest.mark.parametrize(("folder", "notes"), [("foam-docs/vault", 86), ("rustbook-de/src", 112), ("xquad/vault", 96)])
def test_corpus_imports_and_reimports_as_a_no_op(tmp_path: Path, folder: str, notes: int) -> None:
    vault = corpus(folder)
    settings = Settings(store_path=str(tmp_path / "store"))
    with Index(vault, settings) as index:
        first = index.import_vault()
    assert (first.notes_new, first.notes_failed, first.problems) == (notes, 0, [])
    assert first.chunks_embedded > notes // 2
    assert first.edges > 0
    with Index(vault, settings) as index:
        second = index.import_vault()
    assert (second.notes_unchanged, second.chunks_embedded, second.points_written) == (notes, 0, 0)
    store = open_store(vault, settings)
    try:
        assert store.count("notes") == notes
        assert store.count("chunks") == first.chunks_written
    finally:
        store.close()
    assert not (vault / ".mindnet").exists()
