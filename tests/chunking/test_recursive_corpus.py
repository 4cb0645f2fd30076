"""Sweep of strategy `recursive` (R11, R13) over every note of the shared corpora, both groups.

Run: `.venv/bin/pytest -m slow tests/chunking/test_recursive_corpus.py -s` prints the figures.
"""

from __future__ import annotations

import itertools
import re
import time

import pytest

from conftest import CORPORA, corpus
from mindnet.chunking.base import ChunkSpan
from mindnet.chunking.recursive import WORD, chunk_recursive, count_words, separators_of
from mindnet.chunking.sentences import sentence_spans
from mindnet.config import RecursiveSettings

_FRONTMATTER = re.compile(r"\A---\n.*?\n---\n", re.S)
_AFTER_SENTENCE_END = re.compile(r"[.!?…][)\]}\"'”’»«›‹*_~]*")

pytestmark = [
    pytest.mark.slow,
]


def _bodies() -> list[tuple[str, str]]:
    """(path, body) of every note: the `*.md` files in each corpus' note folder, frontmatter cut."""
    notes = sorted(corpus().glob("*/*/**/*.md"))
    return [(str(p.relative_to(CORPORA)), _FRONTMATTER.sub("", p.read_text(encoding="utf-8"), count=1)) for p in notes]


def _violations(path: str, body: str, config: RecursiveSettings) -> tuple[int, list[str]]:
    spans = chunk_recursive(body, config, note_path=path)
    if not body.strip():
        return 0, [] if not spans else [f"{path}: chunks for an empty body"]
    found: list[str] = []
    if spans[0].char_start != 0 or spans[-1].char_end != len(body):
        found.append(f"{path}: chunks do not span the body")
    for prev, cur in itertools.pairwise(spans):
        if prev.char_end != cur.char_start:
            found.append(f"{path}: gap or overlap at {prev.char_end}/{cur.char_start}")
    patterns = [re.compile(p, re.M) for p in separators_of(config)]
    for span in spans:
        words = count_words(body, span.char_start, span.char_end)
        if words > config.max_chunk_size or (words == 0 and len(spans) > 1):
            found.append(f"{path}: {words} words in [{span.char_start}, {span.char_end})")
    for span in spans[1:]:
        c = span.char_start
        ok = (
            any(p.match(body, c) for p in patterns)
            or WORD.match(body, c) is not None
            or body[c - 1].isspace()
            or any(m.end() == c for m in _AFTER_SENTENCE_END.finditer(body, max(0, c - 8), c))
            or _sentence_start_nearby(body, spans, c)
        )
        if not ok:
            found.append(f"{path}: cut at {c} is no separator, sentence or word start: {body[c - 20 : c + 20]!r}")
    return len(spans), found


def _sentence_start_nearby(body: str, spans: list[ChunkSpan], c: int) -> bool:
    """Whether `sentence_spans` starts a sentence at `c` in the two chunks around it.

    The fallback asks `sentence_spans` about a piece, not the body; its cuts are local, so the two
    chunks around the cut stand in for that piece. Needed where the splitter cuts without any space,
    as after an inline code span ending in "!" ("`panic!`-Aufruf").
    """
    before = next(s for s in spans if s.char_end == c)
    after = next(s for s in spans if s.char_start == c)
    start, end = before.char_start, after.char_end
    return any(start + s == c for s, _ in sentence_spans(body[start:end]))


@pytest.mark.parametrize("max_chunk_size", [50, 250])
@pytest.mark.parametrize("group", ["plaintext", "markdown"])
def test_r11_r13_sweep_over_the_shared_corpora(group: str, max_chunk_size: int) -> None:
    bodies = _bodies()
    config = RecursiveSettings(max_chunk_size=max_chunk_size, separator_group=group)
    started = time.perf_counter()
    chunks = 0
    violations: list[str] = []
    for path, body in bodies:
        count, found = _violations(path, body, config)
        chunks += count
        violations.extend(found)
    seconds = time.perf_counter() - started
    print(
        f"\nrecursive sweep: group={group} max={max_chunk_size}: {len(bodies)} notes, {chunks} chunks, "
        f"{len(violations)} violations, {seconds:.1f} s"
    )
    assert len(bodies) > 3000
    assert violations == [], violations[:20]
