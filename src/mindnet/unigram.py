"""sentencepiece's unigram Viterbi in Python, for a query: its ids without loading sentencepiece (issue 26).

Loading a sentencepiece model builds a trie of every piece (USE has 128,000, e5 250,000), which a
one-off search would pay for a query of a few words. `Unigram` computes the same segmentation from
a plain table of pieces and scores (read back from the cache folder), following `EncodeOptimized`
in sentencepiece's `unigram_model.cc`:

- positions are visited left to right; at each one every piece that starts there is tried,
  shortest first, and the best path to where it ends is replaced only by a strictly better score
  (so ties keep the first path found);
- scores are float32 sums, as in C++ (`float` plus `float`); a character no piece covers is one
  `<unk>` node scored `min(score of normal pieces) - 10`;
- the path is read back from the end, and a run of `<unk>` pieces is one id, as
  `SentencePieceProcessor` merges them.

The pieces stay in the UTF-8 buffer the cache keeps them in (`PieceTable`), and a position stops trying
longer pieces once no piece starts with the characters tried: the pieces skipped do not exist, so the
segmentation is the same.

Only normal pieces take part: user-defined ones get a bonus and a matcher of their own in
sentencepiece, so a caller sends texts containing one to sentencepiece instead (`UseQueryTokens`).
Normalisation is not done here: the caller gives the normalised string the model's Viterbi sees.
tests/test_unigram.py compares every id with sentencepiece's on generated and corpus texts.
"""

from __future__ import annotations

import json
import mmap
import struct
from array import array
from collections.abc import Mapping, Sequence
from typing import Any

_F32 = struct.Struct("<f")
UNK_PENALTY = 10.0
"""sentencepiece's `kUnkPenalty`."""
NORMAL = 1
"""`ModelProto.SentencePiece.Type.NORMAL`."""


def f32(value: float) -> float:
    """`value` rounded to float32, as C++ stores a `float` sum."""
    return float(_F32.unpack(_F32.pack(value))[0])


class PieceTable:
    """A model's normal pieces, sorted, in the UTF-8 buffer they are kept in, found by bisection.

    Why not a list of strings: splitting the table into 128,000 (USE) or 250,000 (e5) Python strings took
    a one-off query 10-15 ms of allocations with Python's lock held (issue 26). Here the buffer stays as
    read (or mapped), and the only arrays made are the line starts and, per first two bytes, the range of
    lines that begin with them, so a lookup bisects a few lines. UTF-8 keeps code-point order, so the
    pieces sorted as strings are sorted as bytes.
    """

    def __init__(self, data: bytes | mmap.mmap, ids: Sequence[int]) -> None:
        """Index the lines of `data`.

        Args:
            data: the pieces one a line (`PIECES_FILE`), sorted, no line empty.
            ids: the id of each line's piece.

        Raises:
            ValueError: an empty line, or not one id per line.
        """
        import numpy as np

        raw = np.frombuffer(data, np.uint8)
        ends = np.empty(len(ids), np.int32)  # each line's end, then `len(raw)`: int32 holds any real table
        breaks = np.flatnonzero(raw == ord("\n")).astype(np.int32)
        if len(breaks) + 1 != len(ids):
            raise ValueError("the piece table differs from its ids in length")
        ends[:-1], ends[-1] = breaks, len(raw)
        starts = np.empty_like(ends)
        starts[0], starts[1:] = 0, breaks + 1
        if bool(np.any(ends <= starts)):
            raise ValueError("the piece table has an empty line")
        keys = raw[starts].astype(np.int32) << 8  # first byte, then the second (0 for a one-byte piece)
        longer = ends - starts > 1
        keys[longer] |= raw[starts[longer] + 1]
        self._data = data
        self._starts = memoryview(starts)
        self._ends = memoryview(ends)
        # keys never decrease (the lines are sorted): a bucket's lines are one range
        self._bounds = memoryview(np.searchsorted(keys, np.arange(65537, dtype=np.int32)).astype(np.int32))
        self._ids = ids

    def find(self, piece: bytes) -> tuple[int | None, bool]:
        """(`piece`'s id or None, whether some piece starts with `piece`): a caller that extends a
        piece one character at a time stops at the first False. `piece` is not empty."""
        bucket = piece[0] * 256 + (piece[1] if len(piece) > 1 else 0)
        bounds, starts, ends, data = self._bounds, self._starts, self._ends, self._data
        lo, hi = bounds[bucket], bounds[bucket + 1]
        while lo < hi:
            mid = (lo + hi) // 2
            if data[starts[mid]:ends[mid]] < piece:
                lo = mid + 1
            else:
                hi = mid
        if lo < bounds[bucket + 1]:
            line = data[starts[lo]:ends[lo]]
            if line == piece:
                return self._ids[lo], True
            if line.startswith(piece):
                return None, True
        if len(piece) == 1:  # its longer pieces are in the buckets of its first byte and any second
            return None, bounds[bucket] < bounds[bucket + 256]
        return None, False


class Unigram:
    """A unigram model's pieces and scores, and its Viterbi over a normalised string."""

    def __init__(self, pieces: PieceTable, scores: Sequence[float], unk: int, unk_score: float,
                 longest: int) -> None:
        """Use `from_proto` or `from_files`.

        Args:
            pieces: the normal pieces and their ids.
            scores: every piece's score by id (float32 values).
            unk: the id of `<unk>`.
            unk_score: `min(normal scores) - 10` in float32.
            longest: characters of the longest normal piece.
        """
        self.unk = unk
        self._pieces = pieces
        self._scores = scores
        self._unk_score = unk_score
        self._longest = longest

    def encode(self, text: str) -> list[int]:
        """The ids sentencepiece's unigram Viterbi gives `text` (already normalised)."""
        size = len(text)
        if not size:
            return []
        score = [0.0] * (size + 1)
        start = [-1] * (size + 1)
        piece = [-1] * (size + 1)
        lookup, scores, unk_score = self._pieces.find, self._scores, self._unk_score
        for begin in range(size):
            here = score[begin]
            single = False
            for length in range(1, min(self._longest, size - begin) + 1):
                # surrogatepass: a lone surrogate (an undecodable byte kept by a lenient caller) matches no
                # piece and becomes `<unk>`, as it did when pieces were strings; its bytes keep code-point order
                found, longer = lookup(text[begin : begin + length].encode("utf-8", "surrogatepass"))
                if found is None:
                    if not longer:
                        break  # no piece starts with these characters, so none with more of them
                    continue
                end = begin + length
                candidate = f32(scores[found] + here)
                if start[end] == -1 or candidate > score[end]:
                    score[end], start[end], piece[end] = candidate, begin, found
                single = single or length == 1
            if not single:
                end = begin + 1
                candidate = f32(unk_score + here)
                if start[end] == -1 or candidate > score[end]:
                    score[end], start[end], piece[end] = candidate, begin, self.unk
        out: list[int] = []
        end = size
        while end > 0:
            out.append(piece[end])
            end = start[end]
        out.reverse()
        return [i for k, i in enumerate(out) if not (i == self.unk and k and out[k - 1] == self.unk)]

    @classmethod
    def from_proto(cls, proto: bytes) -> tuple[Unigram, dict[str, bytes]]:
        """The model of a serialised sentencepiece proto and its cache files (`from_files`); needs protobuf."""
        from sentencepiece import sentencepiece_model_pb2 as pb

        model = pb.ModelProto()
        model.ParseFromString(proto)
        pieces = [p.piece for p in model.pieces]
        if any("\n" in p for p in pieces):
            raise ValueError("a piece holds a line break: the table cannot be kept one piece a line")
        scores = array("f", [p.score for p in model.pieces])
        normal = sorted((p.piece, i) for i, p in enumerate(model.pieces) if p.type == NORMAL)
        meta = {"unk": int(model.trainer_spec.unk_id),
                "unk_score": f32(min(scores[i] for _, i in normal) - UNK_PENALTY),
                "longest": max(len(piece) for piece, _ in normal)}
        files = {PIECES_FILE: "\n".join(piece for piece, _ in normal).encode("utf-8"),
                 IDS_FILE: array("i", [i for _, i in normal]).tobytes(), SCORES_FILE: scores.tobytes(),
                 UNIGRAM_FILE: json.dumps(meta).encode()}
        return cls.from_files(files), files

    @classmethod
    def from_files(cls, files: Mapping[str, Any]) -> Unigram:
        """The model kept by `from_proto`: two array reads and the piece table's line index, no per-piece work."""
        ids, scores = array("i"), array("f")
        ids.frombytes(files[IDS_FILE])
        scores.frombytes(files[SCORES_FILE])
        meta: dict[str, Any] = json.loads(files[UNIGRAM_FILE])
        return cls(PieceTable(files[PIECES_FILE], ids), scores, int(meta["unk"]), float(meta["unk_score"]),
                   int(meta["longest"]))


PIECES_FILE, IDS_FILE, SCORES_FILE, UNIGRAM_FILE = "pieces.txt", "piece-ids.i32", "scores.f32", "unigram.json"
"""The cache files of a model: its normal pieces sorted, one a line, their ids, every score by id, the rest."""
