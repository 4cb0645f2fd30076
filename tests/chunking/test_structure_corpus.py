"""Sweep: strategy `structure` over every note of the shared corpora, zero invariant violations.

Real Markdown written by others (foam docs, the German Rust book, Microsoft's Teams docs, XQuAD)
finds what generated documents miss. Every note runs with the `default` profile; the smallest
(`task`) and largest (`project`) profiles run on the three small corpora and on every fifth note
of the large one, which keeps the whole sweep at about a minute.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from conftest import CORPORA, corpus
from mindnet.chunking.invariants import check_chunks
from mindnet.chunking.structure import chunk_structure
from mindnet.chunking.tokens import Tokenizer, default_tokenizer
from mindnet.config import DEFAULT_PROFILES, DEFAULT_STOP_SECTIONS
from mindnet.markdown import parse_blocks

FOLDERS = {
    "foam-docs/vault": "en",
    "rustbook-de/src": "de",
    "msdocs-skype-teams-de/docs": "de",
    "xquad/vault": "de",
}
LARGE = "msdocs-skype-teams-de/docs"
SAMPLE_EVERY = 5
"""Non-default profiles see every fifth note of the large corpus."""
_FRONTMATTER = re.compile(r"\A---[ \t]*\r?\n.*?\r?\n---[ \t]*(?:\r?\n|\Z)", re.S)

pytestmark = [
    pytest.mark.slow,
]


@pytest.fixture(scope="module")
def tok() -> Tokenizer:
    return default_tokenizer()


def _bodies(folder: str, every: int = 1) -> list[tuple[Path, str]]:
    paths = sorted(corpus(folder).rglob("*.md"))[::every]
    return [(p, _FRONTMATTER.sub("", p.read_text(encoding="utf-8"), count=1)) for p in paths]


@pytest.mark.parametrize("profile_name", ["default", "task", "project"])
@pytest.mark.parametrize("folder", list(FOLDERS))
def test_r8_r10_r11_corpus_sweep_has_no_violations(tok: Tokenizer, folder: str, profile_name: str) -> None:
    profile = DEFAULT_PROFILES[profile_name]
    every = SAMPLE_EVERY if folder == LARGE and profile_name != "default" else 1
    notes = _bodies(folder, every)
    assert notes, f"no notes under {folder}"
    lang = FOLDERS[folder]
    violations: list[str] = []
    chunks = 0
    for path, body in notes:
        blocks = parse_blocks(body)
        spans = chunk_structure(
            body, profile, stop_sections=DEFAULT_STOP_SECTIONS, tokenizer=tok, lang=lang, blocks=blocks
        )
        chunks += len(spans)
        found = check_chunks(body, spans, tok, profile, lang=lang, blocks=blocks)
        violations.extend(f"{path.relative_to(CORPORA)}: {v}" for v in found)
    assert chunks > 0
    assert violations == [], "\n".join(violations[:50])
