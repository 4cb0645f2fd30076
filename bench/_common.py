"""Helpers shared by the bench scripts: where the corpora are, how to print a table, memory, disk.

Kept deliberately small: each bench script must stay readable on its own, so only what two
scripts would otherwise copy lives here.
"""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
CORPORA = REPO.parent / "shared" / "corpora"
"""`../shared/corpora` next to the repo, the same layout the issue texts refer to."""
MSDOCS = CORPORA / "msdocs-skype-teams-de"


def megabytes(texts: Sequence[str]) -> float:
    """UTF-8 size in MB (10^6 bytes): MB/s must mean the same bytes for every chunker."""
    return sum(len(t.encode("utf-8")) for t in texts) / 1e6


def peak_rss_mb() -> float:
    """This process's peak resident set size in MB (Linux reports `ru_maxrss` in KiB)."""
    kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return kib * (1 if sys.platform != "darwin" else 1 / 1024) / 1024


def dir_size_mb(path: Path) -> float:
    """Bytes actually allocated on disk below `path` (like `du`), so sparse or preallocated files
    count as the disk space a user loses, not their apparent length."""
    total = 0
    for root, _dirs, files in os.walk(path):
        for name in files:
            try:
                total += os.lstat(os.path.join(root, name)).st_blocks * 512
            except FileNotFoundError:
                continue
    return total / 1e6


def table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """A plain fixed-width table: text left-aligned, numbers right-aligned, readable in a terminal
    and pasteable into an issue as is."""
    cells = [[_cell(v) for v in row] for row in rows]
    widths = [max([len(h)] + [len(r[i]) for r in cells]) for i, h in enumerate(headers)]
    numeric = [all(isinstance(row[i], int | float) or row[i] is None for row in rows) for i in range(len(headers))]

    def line(values: Sequence[str]) -> str:
        return "  ".join(v.rjust(w) if num else v.ljust(w) for v, w, num in zip(values, widths, numeric, strict=True))

    out = [line(list(headers)), "  ".join("-" * w for w in widths)]
    out.extend(line(r) for r in cells)
    return "\n".join(s.rstrip() for s in out)


def _cell(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:,.3f}" if abs(value) < 10 else f"{value:,.1f}"
    if isinstance(value, int):
        return f"{value:,}"
    return str(value)


def dump_json(data: Any) -> None:
    """Machine-readable output for `--json`: one document on stdout, nothing else."""
    json.dump(data, sys.stdout, indent=2, ensure_ascii=False, default=str)
    sys.stdout.write("\n")


def server_url(proc: subprocess.Popen[bytes], address: Path, poll: float) -> str:
    """The URL a spawned `mindnet serve` writes to its address file (`server.json` in the store folder:
    `VAULT/.mindnet/` unless `--store`), once it is its own (a stale file of an earlier server names
    another pid); exits if the server dies first."""
    while True:
        if proc.poll() is not None:
            raise SystemExit(f"mindnet serve exited with {proc.returncode}")
        try:
            data = json.loads(address.read_text())
            if data["pid"] == proc.pid:
                return str(data["url"])
        except (OSError, ValueError, KeyError):
            pass
        time.sleep(poll)


def seconds_to_searchable(get: Callable[..., Any], note: Path, word: str) -> float:
    """Append a paragraph holding `word` to `note`, then ask `/api/search` (lexical) through `get` until the
    note's new chunk comes back: the seconds from the write to that hit (save -> searchable)."""
    with note.open("a", encoding="utf-8") as fh:
        fh.write(f"\n\nDieser Absatz enthält das Wort {word} für den Benchmark.\n")
    written = time.perf_counter()
    while True:
        hits = get("/api/search", q=word, k=1, mode="lexical")
        if hits and word in hits[0]["text"]:
            return time.perf_counter() - written
        time.sleep(0.01)
