"""One hash over every chunk of every corpus note, under both strategies: proof that a speed change is exact.

A change to the chunking hot path must leave every chunk record as it was (text, offsets, lines, token
count, ids, hashes, language, section, flags). Run this before and after the change, each from its own
checkout, and compare the printed digests; `--dump FILE` writes one line per chunk so that a difference
can be found with `diff`.

    .venv/bin/python bench/chunk_digest.py                  # all corpora, structure + recursive
    .venv/bin/python bench/chunk_digest.py --dump /tmp/after.txt
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import sys
from pathlib import Path

from _common import CORPORA
from mindnet.chunking.base import Chunk
from mindnet.chunking.pipeline import chunk_note
from mindnet.chunking.tokens import default_tokenizer
from mindnet.config import Settings
from mindnet.vault import read_vault

VAULTS = ("foam-docs", "msdocs-skype-teams-de", "rustbook-de", "rustbook-en", "xquad")
"""Every shared corpus, read from its root so that every Markdown file in it is a note."""
STRATEGIES = ("structure", "recursive")


def record(chunk: Chunk) -> str:
    """Every field of a chunk on one line, in field order, so any change shows in the digest."""
    return repr(tuple(getattr(chunk, f.name) for f in dataclasses.fields(chunk)))


def main() -> None:
    """Chunk every corpus note under each strategy, print per-strategy and total digests and counts."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpora", type=Path, default=CORPORA)
    parser.add_argument("--dump", type=Path, default=None, help="write one line per chunk here")
    args = parser.parse_args()
    tok = default_tokenizer()
    total = hashlib.sha256()
    dump = args.dump.open("w", encoding="utf-8") if args.dump else None
    chunks = 0
    for strategy in STRATEGIES:
        settings = dataclasses.replace(Settings(), strategy=strategy)
        digest = hashlib.sha256()
        count = 0
        for vault in VAULTS:
            for note in read_vault(args.corpora / vault, settings).notes:
                for chunk in chunk_note(note, settings, None, tok):
                    line = f"{strategy}\t{vault}\t{record(chunk)}\n"
                    digest.update(line.encode("utf-8"))
                    if dump is not None:
                        dump.write(line)
                    count += 1
        total.update(digest.digest())
        chunks += count
        print(f"{strategy}: {count} chunks, sha256 {digest.hexdigest()}")
    print(f"all: {chunks} chunks, sha256 {total.hexdigest()}")
    if dump is not None:
        dump.close()
    sys.stdout.flush()


if __name__ == "__main__":
    main()
