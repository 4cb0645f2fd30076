"""`mindnet lint` timings on msdocs-skype-teams-de (2,905 notes): full vault, and one staged file.

Issue goal: one staged file in a 3k-note vault in <= 0.3 s with a warm vault-index cache, its
links still resolved against the whole vault.

Runs in a temporary copy of the corpus (the shared corpus is never written), after waiting out the
racy window of `file_stat` (the copies' ctimes are new, and a just-changed file is never cached):

- full, no cache:    `lint_vault(root, use_cache=False)`: read and lint every note.
- full, cold cache:  the first run that writes `.mindnet/lint-index.json`.
- full, warm cache:  every note is still read (its body is linted), the index is not rebuilt.
- one file, warm:    `lint_vault(root, files=[f])` for `--files` different notes, in process.
- one file, process: `mindnet lint FILE --vault ROOT` as pre-commit runs it (interpreter start,
  imports, the lint), and the same through `python -c` importing only `mindnet.lint`, which shows
  how much of the process time the CLI's other imports (store, Qdrant client) cost.

    .venv/bin/python bench/lint.py [--runs 3] [--files 20] [--json]
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

from _common import MSDOCS, table
from mindnet import file_stat
from mindnet.config import load_settings
from mindnet.lint import lint_vault

BIN = Path(sys.executable).parent


def timed(fn, runs: int) -> tuple[float, object]:  # type: ignore[no-untyped-def]
    """Median wall time of `runs` calls, and the last result."""
    times: list[float] = []
    result = None
    for _ in range(runs):
        t = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times), result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=3, help="repetitions of each full-vault run")
    parser.add_argument("--files", type=int, default=20, help="single files to lint with a warm cache")
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "docs"
        shutil.copytree(MSDOCS / "docs", root)
        time.sleep(file_stat.RACY_SECONDS)  # as in a vault whose files were not all saved a moment ago
        settings = load_settings(root)
        notes = sorted(root.rglob("*.md"))
        rows: list[tuple[str, int, float, str]] = []

        t_nocache, report = timed(lambda: lint_vault(root, settings, use_cache=False), args.runs)
        counts = Counter(f.code for f in report.findings)  # type: ignore[attr-defined]
        rows.append(("full, no cache", len(notes), t_nocache, "median"))
        t0 = time.perf_counter()
        lint_vault(root, settings)
        rows.append(("full, cold cache (writes index)", len(notes), time.perf_counter() - t0, "once"))
        t_warm, _ = timed(lambda: lint_vault(root, settings), args.runs)
        rows.append(("full, warm cache", len(notes), t_warm, "median"))

        step = max(1, len(notes) // args.files)
        picks = notes[::step][: args.files]
        singles = []
        for path in picks:
            t = time.perf_counter()
            lint_vault(root, settings, files=[path])
            singles.append(time.perf_counter() - t)
        rows.append(("one file, warm cache, in process", 1, statistics.median(singles), f"median of {len(picks)}"))
        rows.append(("one file, warm cache, in process", 1, max(singles), "max"))

        def process(cmd: list[str]) -> float:
            times = []
            for path in picks[:5]:
                t = time.perf_counter()
                subprocess.run([*cmd, str(path)], capture_output=True, check=False)
                times.append(time.perf_counter() - t)
            return statistics.median(times)

        cli = process([str(BIN / "mindnet"), "lint", "--vault", str(root)])
        rows.append(("one file, `mindnet lint` process", 1, cli, "median of 5"))
        code = (
            "import sys; from pathlib import Path; from mindnet.config import load_settings; "
            "from mindnet.lint import lint_vault; r = Path(sys.argv[1]); "
            "sys.exit(lint_vault(r, load_settings(r), files=sys.argv[2:]).exit_code)"
        )
        bare = process([sys.executable, "-c", code, str(root)])
        rows.append(("one file, process importing mindnet.lint only", 1, bare, "median of 5"))

    if args.json:
        print(
            json.dumps(
                {
                    "rows": [dict(zip(("run", "files", "seconds", "stat"), r, strict=True)) for r in rows],
                    "findings": dict(sorted(counts.items())),
                },
                indent=2,
            )
        )
        return
    print(table(["run", "files", "seconds", "stat"], [(a, b, round(c, 3), d) for a, b, c, d in rows]))
    print("findings:", ", ".join(f"{k} {v}" for k, v in sorted(counts.items())))


if __name__ == "__main__":
    main()
