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

Only normal pieces take part: user-defined ones get a bonus and a matcher of their own in
sentencepiece, so a caller sends texts containing one to sentencepiece instead (`UseQueryTokens`).
Normalisation is not done here: the caller gives the normalised string the model's Viterbi sees.
tests/test_unigram.py compares every id with sentencepiece's on generated and corpus texts.
"""

from __future__ import annotations

import bisect
import json
import struct
from array import array
from collections.abc import Sequence
from typing import Any

_F32 = struct.Struct("<f")
UNK_PENALTY = 10.0
"""sentencepiece's `kUnkPenalty`."""
NORMAL = 1
"""`ModelProto.SentencePiece.Type.NORMAL`."""


def f32(value: float) -> float:
    """`value` rounded to float32, as C++ stores a `float` sum."""
    return float(_F32.unpack(_F32.pack(value))[0])


class Unigram:
    """A unigram model's pieces and scores, and its Viterbi over a normalised string."""

    def __init__(self, pieces: Sequence[str], ids: Sequence[int], scores: Sequence[float], unk: int,
                 unk_score: float, longest: int) -> None:
        """Use `from_proto` or `from_files`.

        Args:
            pieces: the normal pieces, sorted (looked up by bisection: no table of 250,000 entries
                is built at load).
            ids: the id of each of `pieces`.
            scores: every piece's score by id (float32 values).
            unk: the id of `<unk>`.
            unk_score: `min(normal scores) - 10` in float32.
            longest: characters of the longest normal piece.
        """
        self.unk = unk
        self._pieces = pieces
        self._piece_ids = ids
        self._scores = scores
        self._unk_score = unk_score
        self._longest = longest

    def _id(self, piece: str) -> int | None:
        at = bisect.bisect_left(self._pieces, piece)
        return self._piece_ids[at] if at < len(self._pieces) and self._pieces[at] == piece else None

    def encode(self, text: str) -> list[int]:
        """The ids sentencepiece's unigram Viterbi gives `text` (already normalised)."""
        size = len(text)
        if not size:
            return []
        score = [0.0] * (size + 1)
        start = [-1] * (size + 1)
        piece = [-1] * (size + 1)
        lookup, scores, unk_score = self._id, self._scores, self._unk_score
        for begin in range(size):
            here = score[begin]
            single = False
            for length in range(1, min(self._longest, size - begin) + 1):
                found = lookup(text[begin : begin + length])
                if found is None:
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
    def from_files(cls, files: dict[str, bytes]) -> Unigram:
        """The model kept by `from_proto`: a split and two array reads, no per-piece work."""
        pieces = files[PIECES_FILE].decode("utf-8").split("\n")
        ids, scores = array("i"), array("f")
        ids.frombytes(files[IDS_FILE])
        scores.frombytes(files[SCORES_FILE])
        if len(ids) != len(pieces):
            raise ValueError("the piece table and its ids differ in length")
        meta: dict[str, Any] = json.loads(files[UNIGRAM_FILE])
        return cls(pieces, ids, scores, int(meta["unk"]), float(meta["unk_score"]), int(meta["longest"]))


PIECES_FILE, IDS_FILE, SCORES_FILE, UNIGRAM_FILE = "pieces.txt", "piece-ids.i32", "scores.f32", "unigram.json"
"""The cache files of a model: its normal pieces sorted, one a line, their ids, every score by id, the rest."""
