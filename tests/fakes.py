"""Test doubles shared by tests that are about something other than the model (SPEC §8)."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from mindnet.chunking.base import Chunk
from mindnet.embedding import Embedder, Vectors
from mindnet.vault import Note


class FakeEmbedder(Embedder):
    """Deterministic hash-based vectors: the same text always gives the same unit vector.

    Texts sharing words get similar vectors (a bag of hashed words), so search tests can still
    expect a sensible order; `calls` counts texts embedded, for cache tests.
    """

    def __init__(self, dim: int = 32, model_id: str = "fake@1") -> None:
        self._dim = dim
        self._model_id = model_id
        self.calls = 0

    @property
    def model_id(self) -> str:
        return self._model_id

    @property
    def dim(self) -> int:
        return self._dim

    def count_tokens(self, text: str) -> int:
        return len(text.split()) + 2

    def _one(self, text: str) -> npt.NDArray[np.float32]:
        vec = np.zeros(self._dim, dtype=np.float32)
        for word in text.lower().split() or [""]:
            digest = hashlib.sha256(word.encode("utf-8")).digest()
            rng = np.random.default_rng(int.from_bytes(digest[:8], "little"))
            vec += rng.standard_normal(self._dim).astype(np.float32)
        return vec / max(float(np.linalg.norm(vec)), 1e-12)

    def embed_passages(self, texts: Sequence[str]) -> Vectors:
        self.calls += len(texts)
        out = np.empty((len(texts), self._dim), dtype=np.float32)
        for i, text in enumerate(texts):
            out[i] = self._one(text)
        return out

    def embed_query(self, text: str) -> npt.NDArray[np.float32]:
        return self._one(text)


def make_note(
    path: str,
    body: str = "",
    *,
    note_id: str | None = None,
    title: str | None = None,
    aliases: tuple[str, ...] = (),
    frontmatter: dict[str, Any] | None = None,
) -> Note:
    """A note record built by hand, for link and graph tests that need no file."""
    stem = path.rsplit("/", 1)[-1].removesuffix(".md")
    return Note(
        note_id=note_id or stem.lower().replace(" ", "-"),
        title=title or stem,
        type="note",
        status=None,
        tags=(),
        aliases=aliases,
        area=None,
        project=None,
        priority=None,
        people=(),
        created="2024-01-01T00:00:00",
        updated=None,
        path=path,
        lang="en",
        fulltext=body,
        frontmatter=frontmatter or {},
        references=(),
        content_hash=f"{path}|{body}|{title}|{aliases}|{note_id}|{frontmatter}",
    )


def make_chunk(
    note: Note, index: int, start: int, end: int, content_start: int | None = None, section_path: str = "/"
) -> Chunk:
    """A chunk record built by hand over `note.fulltext[start:end]`, for link and graph tests."""
    return Chunk(
        chunk_id=f"{note.note_id}#c{index:02d}",
        note_id=note.note_id,
        note_title=note.title,
        path=note.path,
        type=note.type,
        area=None,
        project=None,
        tags=(),
        chunk_index=index,
        char_start=start,
        char_end=end,
        content_start=start if content_start is None else content_start,
        line_start=1,
        line_end=1,
        token_count=1,
        section_title=section_path.rsplit("/", 1)[-1],
        section_path=section_path,
        lang="en",
        text=note.fulltext[start:end],
        created_at=note.created,
        oversize=False,
        has_code=False,
        summary=None,
        stable_key="k",
        text_hash="h",
    )
