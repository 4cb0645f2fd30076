"""Compare the two `parse_blocks` engines on the shared corpora: speed and block parity.

Decides `mindnet.markdown.DEFAULT_ENGINE`: pyromark may be the default only if its blocks equal
markdown-it's on every file (the whole `Block` records: kinds, spans, list items, titles, callouts,
checklists, fence info). Run from the repo root:

    .venv/bin/python bench/markdown_parsers.py [CORPORA_ROOT] [--examples N]
"""

from __future__ import annotations

import argparse
import re
import time
from pathlib import Path

from _common import CORPORA as SHARED_CORPORA
from mindnet.markdown import Block, parse_blocks

CORPORA = ("foam-docs/vault", "rustbook-de/src", "msdocs-skype-teams-de/docs", "xquad/vault")
_FRONTMATTER = re.compile(r"\A---\r?\n.*?\r?\n---[ \t]*(?:\r?\n|\Z)", re.S)


def load_bodies(root: Path) -> list[tuple[str, str]]:
    """(path, body) for every `.md` file, a leading `---` … `---` block stripped (good enough here)."""
    bodies = []
    for corpus in CORPORA:
        for path in sorted((root / corpus).rglob("*.md")):
            text = path.read_bytes().decode("utf-8", errors="replace").removeprefix("\ufeff")
            bodies.append((str(path.relative_to(root)), _FRONTMATTER.sub("", text, count=1)))
    return bodies


def signature(blocks: list[Block]) -> list[tuple[str, int, int]]:
    """What parity means: the same top-level kinds with the same spans."""
    return [(b.kind, b.char_start, b.char_end) for b in blocks]


def timed(bodies: list[tuple[str, str]], engine: str) -> tuple[float, dict[str, list[Block]]]:
    """Seconds for one pass over all bodies (best of two, so import and cache warm-up do not count)."""
    best = float("inf")
    results: dict[str, list[Block]] = {}
    for _ in range(2):
        t0 = time.perf_counter()
        results = {path: parse_blocks(body, engine) for path, body in bodies}  # type: ignore[arg-type]
        best = min(best, time.perf_counter() - t0)
    return best, results


def main() -> None:
    """Print MB/s for both engines, the number of differing files and a few example diffs."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("root", nargs="?", default=SHARED_CORPORA, type=Path)
    parser.add_argument("--examples", type=int, default=5)
    args = parser.parse_args()

    bodies = load_bodies(args.root)
    megabytes = sum(len(body.encode("utf-8")) for _, body in bodies) / 1e6
    print(f"{len(bodies)} files, {megabytes:.1f} MB of bodies")
    runs = {engine: timed(bodies, engine) for engine in ("markdown-it", "pyromark")}
    for engine, (seconds, _) in runs.items():
        print(f"{engine:12s} {seconds:7.2f} s  {megabytes / seconds:7.1f} MB/s")

    reference, fast = runs["markdown-it"][1], runs["pyromark"][1]
    bodies_by_path = dict(bodies)
    differing = [path for path in reference if reference[path] != fast[path]]
    print(f"files whose top-level blocks differ: {len(differing)} of {len(bodies)}")
    for path in differing[: args.examples]:
        body = bodies_by_path[path]
        ref, got = signature(reference[path]), signature(fast[path])
        first = next((i for i, (a, b) in enumerate(zip(ref, got, strict=False)) if a != b), min(len(ref), len(got)))
        print(f"\n--- {path} (first difference at block {first})")
        for label, sig in (("markdown-it", ref), ("pyromark", got)):
            for kind, start, end in sig[first : first + 2]:
                print(f"  {label:11s} {kind:10s} {start}-{end} {body[start:end][:70]!r}")


if __name__ == "__main__":
    main()
