"""One code version's cold import and in-process search latency, for paired before/after runs.

Run it once per version, interleaved, each in its own process so nothing is shared:

    for r in 1 2 3; do for src in /path/to/old/src src; do
        .venv/bin/python bench/before_after.py $src ../shared/corpora/foam-docs/vault; done; done

`SRC` is the `src` folder of a checkout (a `git worktree add /tmp/old <rev>` gives the old one); the vault is
copied to a temporary folder, imported with the real model into a fresh store, then searched 30 times.
"""

from __future__ import annotations

import json
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

QUERIES = ("Wie funktioniert RRF?", "chunk overlap", "Qdrant collections", "Rückverweise", "embeddings model")


def main(src: str, vault_src: Path) -> None:
    sys.path.insert(0, src)
    from mindnet.api import Index
    from mindnet.config import load_settings

    tmp = Path(tempfile.mkdtemp())
    vault = tmp / "v"
    shutil.copytree(vault_src, vault, ignore=shutil.ignore_patterns(".mindnet"))
    started = time.perf_counter()
    settings = load_settings(vault, overrides={"store_path": str(tmp / "store"), "quality_tier": False})
    with Index(vault, settings) as index:
        summary = index.import_vault()
        seconds = time.perf_counter() - started
        index.search(QUERIES[0])
        latencies = []
        for query in QUERIES * 6:
            began = time.perf_counter()
            index.search(query, k=10, by_note=True)
            latencies.append(time.perf_counter() - began)
    print(json.dumps({"src": src, "import_s": seconds, "chunks": summary.chunks_written,
                      "search_p50_ms": 1000 * statistics.median(latencies)}))
    shutil.rmtree(tmp)


if __name__ == "__main__":
    main(sys.argv[1], Path(sys.argv[2]))
