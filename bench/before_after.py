"""One code version's cold import and in-process search latency, for paired before/after runs.

Run it once per version, interleaved, each in its own process so nothing is shared:

    for r in 1 2 3; do for src in /path/to/old/src src; do
        .venv/bin/python bench/before_after.py $src ../shared/corpora/foam-docs/vault; done; done

`SRC` is the `src` folder of a checkout (a `git worktree add /tmp/old <rev>` gives the old one); the vault is
copied to a temporary folder, imported with the real model into a fresh store, then searched 30 times.

`--pairs N --old OLD_SRC [--new NEW_SRC] VAULT` does the alternation itself (old first in odd rounds, new
first in even ones), one process per import, and prints chunks/s of each side, the encoder's share and
new/old per round. `--import-only` leaves the searches out. The timed import is what a CLI user waits
for after start-up: settings, store, model, `import_vault`, and closing the store (the flush). The
encoder's seconds are the wall time inside the USE model's `embed_passages` (both versions have it),
so its share means the same in old and new code. Old code without `Index.close` or a context manager
(before issue 14) is closed through its store.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

QUERIES = ("Wie funktioniert RRF?", "chunk overlap", "Qdrant collections", "Rückverweise", "embeddings model")
_RESULT = "BEFORE-AFTER "


def _time_encoder() -> Callable[[], float]:
    """Time the USE model's `embed_passages` and `prepare` (the start-up, where the version has it).

    Returns a reader of the wall seconds in which the model was starting or embedding: the union of
    those intervals, so a start-up on its own thread that the first batch waits for counts once. Old
    code without `prepare` paid the start-up inside its first `embed_passages`, so both count it.
    """
    from mindnet import embedding

    spans: list[tuple[float, float]] = []
    lock = threading.Lock()

    def timed(method: Callable[..., Any]) -> Callable[..., Any]:
        def run(*args: Any) -> Any:
            began = time.perf_counter()
            try:
                return method(*args)
            finally:
                with lock:
                    spans.append((began, time.perf_counter()))
        return run

    use = embedding.UseEmbedder
    use.embed_passages = timed(use.embed_passages)  # type: ignore[method-assign]
    if "prepare" in vars(use):
        use.prepare = timed(use.prepare)  # type: ignore[method-assign]

    def union() -> float:
        total, reach = 0.0, float("-inf")
        for began, ended in sorted(spans):
            if ended > reach:
                total += ended - max(began, reach)
                reach = ended
        return total

    return union


def _close(index: Any) -> None:
    """Close whatever the version has: `Index.close`, else its store (old code closed nothing)."""
    close = getattr(index, "close", None)
    if close is not None:
        close()
        return
    store = getattr(index, "_store", None)
    if store is not None:
        store.close()


def main(src: str, vault_src: Path, import_only: bool = False, overlap: bool = False) -> dict[str, Any]:
    sys.path.insert(0, src)
    encoder_seconds = _time_encoder()
    if overlap:
        import mindnet.sync

        # As if the other programs were idle: the encoder on its own thread whatever the load
        # (versions without the load gate ignore it).
        mindnet.sync._spare_cores = lambda: float(os.cpu_count() or 1)  # type: ignore[attr-defined]
    import mindnet
    from mindnet.api import Index
    from mindnet.config import load_settings

    if not Path(mindnet.__file__).resolve().is_relative_to(Path(src).resolve()):
        sys.exit(f"mindnet came from {mindnet.__file__}, not from {src}")
    tmp = Path(tempfile.mkdtemp())
    vault = tmp / "v"
    shutil.copytree(vault_src, vault, ignore=shutil.ignore_patterns(".mindnet"))
    load = os.getloadavg()[0]
    started, cpu = time.perf_counter(), time.process_time()
    settings = load_settings(vault, overrides={"store_path": str(tmp / "store"), "quality_tier": False})
    index = Index(vault, settings)
    summary = index.import_vault()
    if import_only:
        _close(index)
    seconds = time.perf_counter() - started
    cpu_seconds = time.process_time() - cpu
    out: dict[str, Any] = {
        "src": src, "import_s": seconds, "cpu_s": cpu_seconds, "encoder_s": encoder_seconds(),
        "chunks": summary.chunks_written, "load_before": load,
        "encoder_ahead": getattr(summary, "encoder_ahead", 0),
    }
    if not import_only:
        index.search(QUERIES[0])
        latencies = []
        for query in QUERIES * 6:
            began = time.perf_counter()
            index.search(query, k=10, by_note=True)
            latencies.append(time.perf_counter() - began)
        out["search_p50_ms"] = 1000 * statistics.median(latencies)
        _close(index)
    shutil.rmtree(tmp)
    return out


def pairs(old: str, new: str, vault: Path, rounds: int, import_only: bool, overlap: bool = False) -> None:
    """Old and new alternated `rounds` times, one process each, then a table and new/old per round."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("MINDNET_")}
    runs: dict[str, list[dict[str, Any]]] = {"old": [], "new": []}
    for rnd in range(rounds):
        order = [("old", old), ("new", new)] if rnd % 2 == 0 else [("new", new), ("old", old)]
        for side, src in order:
            cmd = [sys.executable, __file__, src, str(vault)] + (["--import-only"] if import_only else [])
            cmd += ["--overlap"] if overlap else []
            done = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False)
            lines = [ln for ln in done.stdout.splitlines() if ln.startswith(_RESULT)]
            if done.returncode != 0 or not lines:
                sys.exit(f"{side} run failed (exit {done.returncode}): {done.stderr.strip()[-2000:]}")
            run = json.loads(lines[-1][len(_RESULT):])
            runs[side].append(run)
            print(f"round {rnd + 1} {side}: {_line(run)}", file=sys.stderr, flush=True)
    print(f"\n{vault}: {rounds} rounds, alternated, one process per import, empty store and caches")
    for side in ("old", "new"):
        for i, run in enumerate(runs[side], 1):
            print(f"  {side} #{i}: {_line(run)}")
    ratios = [n["chunks"] / n["import_s"] / (o["chunks"] / o["import_s"]) for o, n in zip(*runs.values(), strict=True)]
    print("  new/old chunks/s per round: " + ", ".join(f"{r:.2f}x" for r in ratios))
    print(f"  median new/old: {statistics.median(ratios):.2f}x")


def _line(run: dict[str, Any]) -> str:
    share = 100 * run["encoder_s"] / run["import_s"]
    return (f"{run['chunks']} chunks in {run['import_s']:.1f} s = {run['chunks'] / run['import_s']:.1f} chunks/s, "
            f"encoder {run['encoder_s']:.1f} s ({share:.0f} %), outside {run['import_s'] - run['encoder_s']:.1f} s, "
            f"cpu {run['cpu_s']:.1f} s, ahead {run['encoder_ahead']}, load {run['load_before']:.1f}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("src", nargs="?", help="a checkout's src folder (one run)")
    parser.add_argument("vault", type=Path)
    parser.add_argument("--import-only", action="store_true", help="no searches after the import")
    parser.add_argument("--overlap", action="store_true", help="the encoder on its own thread whatever the load")
    parser.add_argument("--pairs", type=int, default=0, help="alternate --old and --new this many rounds")
    parser.add_argument("--old", help="the old checkout's src folder (with --pairs)")
    parser.add_argument("--new", default=str(Path(__file__).resolve().parent.parent / "src"))
    args = parser.parse_args()
    if args.pairs:
        if not args.old:
            parser.error("--pairs needs --old")
        pairs(args.old, args.new, args.vault, args.pairs, args.import_only, args.overlap)
    else:
        if not args.src:
            parser.error("give SRC, or --pairs with --old")
        print(_RESULT + json.dumps(main(args.src, args.vault, args.import_only, args.overlap)), flush=True)
