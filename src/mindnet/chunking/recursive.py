"""Strategy `recursive`: Elasticsearch-compatible recursive chunking by separator patterns (R13).

Given `max_chunk_size` (in words) and an ordered list of separator regexes, a text within the
maximum is one chunk. Otherwise it is split at every match start of the current separator (the
separator text begins the next piece), adjacent pieces are merged greedily while their summed word
count stays within the maximum, and every merged piece still over the maximum is split again with
the next separator. With no separator left, sentences are packed greedily up to the maximum, and a
single sentence over the maximum is cut at word starts. This is the algorithm of Elasticsearch's
`RecursiveChunker` (9.1 / 8.19), including its summed word counts when merging.

Tiling: the chunks of a note tile its body exactly, and the offsets index the body unchanged.
Whitespace between two pieces is assigned deterministically:

- at a separator cut, the separator match (often `\\n\\n` or `\\n## `) *begins* the next chunk,
  as in Elasticsearch;
- at a sentence or word cut, the whitespace (and punctuation) after the last sentence or word
  *ends* the previous chunk, as in Elasticsearch's sentence chunker (ICU sentence boundaries
  keep trailing spaces with the sentence), so the next chunk starts at a sentence or word start.

Deviations from Elasticsearch, each because the chunk must be worth embedding:

- a body without any non-whitespace character gives no chunk (Elasticsearch returns one);
- a chunk without a single word (e.g. only whitespace, `---` or fence lines) is folded into the
  next chunk (the previous one at the end); it adds 0 words, so the maximum still holds;
- optional `sentence_overlap`: each chunk after the first also starts with the last N whole
  sentences of the previous chunk's new content (`content_start` marks where its new content
  begins). The new-content ranges are exactly the chunks of overlap 0, so only those are bounded
  by `max_chunk_size`; the overlap is extra context on top (R10, R11).

Catastrophic user patterns: Python's `re` cannot be interrupted from another thread, so when a
note over the maximum is cut with user-supplied `separators`, the work runs in a forked child
process that the parent kills after `time_limit` seconds, reporting the note and the pattern that
was running (built-in groups are trusted and run in-process). The fork costs about 7 ms per
over-max note; the third-party `regex` package (`finditer(..., timeout=)`) would remove it.
"""

from __future__ import annotations

import contextlib
import dataclasses
import itertools
import json
import os
import re
import select
import signal
import time
from collections.abc import Callable, Sequence
from typing import TypeAlias

from ..config import RecursiveSettings
from ..errors import ChunkingError, ConfigError
from ..text import fence_spans
from .base import ChunkSpan
from .sentences import WORD, sentence_spans, word_spans

Span: TypeAlias = tuple[int, int]
"""Half-open char range `[start, end)` into the note body."""

MAX_CHUNK_SIZE_LOWER_LIMIT = 10
MAX_CHUNK_SIZE_UPPER_LIMIT = 300
"""Elasticsearch's bounds for `max_chunk_size` (RecursiveChunkingSettings.java)."""

SEPARATOR_GROUPS: dict[str, tuple[str, ...]] = {
    "plaintext": (
        r"(?<!\n)\n\n(?!\n)",
        r"(?<!\n)\n(?!\n)",
    ),
    "markdown": (
        r"\n# ",
        r"\n## ",
        r"\n### ",
        r"\n#### ",
        r"\n##### ",
        r"\n###### ",
        r"\n^(?!\s*$).*\n-{1,}\n",
        r"\n^(?!\s*$).*\n={1,}\n",
    ),
}
"""The built-in separator lists of R13. Order matters: the first pattern is tried first, so the
coarsest structure (paragraphs, H1) comes before finer structure (lines, deeper headings)."""

_SCOPE = "chunking_settings"
"""Elasticsearch's name for the settings object in its messages (ModelConfigurations)."""



def separators_of(settings: RecursiveSettings) -> tuple[str, ...]:
    """The separator patterns the settings stand for: the user's list or the group's list."""
    if settings.separators is not None:
        return tuple(settings.separators)
    return SEPARATOR_GROUPS[settings.separator_group or "plaintext"]


def validate(settings: RecursiveSettings) -> RecursiveSettings:
    """Check recursive settings once, at the edge, with Elasticsearch's messages.

    Messages follow Elasticsearch's `RecursiveChunkingSettings.fromMap` and `InferenceUtils`
    wording, collected and joined like its `ValidationException` ("Validation Failed: 1: …;").
    Elasticsearch never checks the regexes nor a "neither" case (it defaults to `plaintext`); those
    two messages are ours in the same style, and the regex one gives the position of the error.

    Args:
        settings: the values as read from config, environment or flags.

    Returns:
        The same settings with `separators` as a tuple, so callers can hash and compare them.

    Raises:
        ConfigError: every problem found, in one message.
    """
    errors: list[str] = []
    size = settings.max_chunk_size
    if isinstance(size, bool) or not isinstance(size, int):
        errors.append(
            f"field [max_chunk_size] is not of the expected type. The value [{size}] cannot be "
            "converted to a [Integer]"
        )
    elif size <= 0:
        errors.append(f"[{_SCOPE}] Invalid value [{size}]. [max_chunk_size] must be a positive integer")
    elif size < MAX_CHUNK_SIZE_LOWER_LIMIT:
        # Elasticsearch formats both numbers as Java doubles, hence "[5.0]" and "[10.0]".
        errors.append(
            f"[{_SCOPE}] Invalid value [{float(size)}]. [max_chunk_size] must be greater than or "
            f"equal to [{float(MAX_CHUNK_SIZE_LOWER_LIMIT)}]"
        )
    elif size > MAX_CHUNK_SIZE_UPPER_LIMIT:
        errors.append(
            f"[{_SCOPE}] Invalid value [{float(size)}]. [max_chunk_size] must be less than or "
            f"equal to [{float(MAX_CHUNK_SIZE_UPPER_LIMIT)}]"
        )

    group, separators = settings.separator_group, settings.separators
    if group is not None and group not in SEPARATOR_GROUPS:
        errors.append(
            f"[{_SCOPE}] Invalid value [{group}] received. [separator_group] must be one of "
            f"[{', '.join(sorted(SEPARATOR_GROUPS))}]"
        )
    if group is not None and separators is not None:
        # Elasticsearch's text still says "separator_set", the option's pre-release name.
        errors.append("Recursive chunking settings can not have both separators and separator_group")
    elif group is None and separators is None:
        errors.append("Recursive chunking settings must have either separators or separator_group")
    elif separators is not None:
        if isinstance(separators, str):
            errors.append(
                f"field [separators] is not of the expected type. The value [{separators}] cannot "
                "be converted to a [List]"
            )
        elif len(separators) == 0:
            errors.append("Recursive chunking settings can not have an empty list of separators")
        else:
            errors.extend(_regex_errors(separators))

    overlap = settings.sentence_overlap
    if isinstance(overlap, bool) or not isinstance(overlap, int) or overlap < 0:
        errors.append(f"sentence_overlap[{overlap}] must be a non-negative integer")

    if errors:
        raise ConfigError("Validation Failed: " + "".join(f"{i}: {e};" for i, e in enumerate(errors, 1)))
    if separators is not None and not isinstance(separators, tuple):
        settings = dataclasses.replace(settings, separators=tuple(separators))
    return settings


def _regex_errors(separators: Sequence[object]) -> list[str]:
    errors: list[str] = []
    for index, pattern in enumerate(separators):
        if not isinstance(pattern, str):
            errors.append(
                f"field [separators] is not of the expected type. The value [{pattern}] cannot be "
                "converted to a [String]"
            )
            continue
        try:
            re.compile(pattern, re.M)
        except re.error as exc:
            errors.append(
                f"[{_SCOPE}] Invalid value [{pattern}] received. [separators][{index}] must be a "
                f"valid regular expression: {exc.msg} at position {exc.pos}"
            )
    return errors


def count_words(text: str, start: int = 0, end: int | None = None) -> int:
    """Words in `text[start:end]` (`max_chunk_size` units, `sentences.WORD`), without copying the slice.

    `pos`/`endpos` give the same matches as the slice: a word match starts at any word character
    and its lookbehind only looks inside the match.
    """
    return sum(1 for _ in WORD.finditer(text, start, len(text) if end is None else end))


def chunk_recursive(
    body: str,
    settings: RecursiveSettings,
    *,
    note_path: str = "<stdin>",
    time_limit: float = 5.0,
    lang: str = "de",
) -> list[ChunkSpan]:
    """Cut a note body into chunks with the recursive strategy (R13).

    Args:
        body: the note body (`fulltext`, frontmatter removed), exactly as in the file.
        settings: recursive settings; validated here as well, since they may come from anywhere.
        note_path: the note's vault path, named in a timeout error.
        time_limit: seconds a note may take when user-supplied separators are in play.
        lang: language of the note for the sentence fallback.

    Returns:
        Spans in body order; with `sentence_overlap` 0 they tile the body exactly. Section fields
        stay None so the shared `finalize` derives them from the headings (R7).

    Raises:
        ConfigError: invalid settings.
        ChunkingError: a user pattern ran longer than `time_limit` on this note.
    """
    settings = validate(settings)
    if not body.strip():
        return []
    if count_words(body) <= settings.max_chunk_size:
        content = [(0, len(body))]
    elif settings.separators is None or not hasattr(os, "fork"):
        # Built-in groups are fixed, linear patterns; without fork (Windows) there is no guard.
        content = _content_spans(body, separators_of(settings), settings.max_chunk_size, lang)
    else:
        content = _guarded_content_spans(body, settings, lang, note_path, time_limit)
    return _to_chunk_spans(body, content, settings.sentence_overlap, lang)


def _content_spans(
    body: str,
    patterns: Sequence[str],
    max_words: int,
    lang: str,
    on_pattern: Callable[[int], None] | None = None,
) -> list[Span]:
    """The overlap-0 chunks of an over-max body: split, merge, recurse, fold word-less chunks."""
    compiled = [re.compile(p, re.M) for p in patterns]
    spans: list[Span] = []
    _split(body, 0, len(body), 0, compiled, max_words, lang, spans, on_pattern)
    return _fold_wordless(body, spans)


def _split(
    body: str,
    start: int,
    end: int,
    level: int,
    patterns: Sequence[re.Pattern[str]],
    max_words: int,
    lang: str,
    out: list[Span],
    on_pattern: Callable[[int], None] | None,
) -> None:
    """Append the chunks of `body[start:end]`, known to be over `max_words`, to `out`.

    The separator runs on the slice, not the whole body, matching Elasticsearch's matcher
    regions (anchoring bounds, opaque lookarounds): `^` matches at the piece start and
    lookarounds do not see past the piece.
    """
    if level == len(patterns):
        if on_pattern is not None:
            on_pattern(-1)
        out.extend(_sentence_chunks(body, start, end, max_words, lang))
        return
    if on_pattern is not None:
        on_pattern(level)
    piece = body[start:end]
    cuts = [start + m.start() for m in patterns[level].finditer(piece) if m.start() > 0]
    bounds = [start, *sorted(set(cuts)), end]
    pieces = [(a, b, count_words(body, a, b)) for a, b in itertools.pairwise(bounds)]
    for a, b, words in _merge(pieces, max_words):
        if words <= max_words:
            out.append((a, b))
        else:
            _split(body, a, b, level + 1, patterns, max_words, lang, out, on_pattern)


def _merge(pieces: list[tuple[int, int, int]], max_words: int) -> list[tuple[int, int, int]]:
    """Merge adjacent pieces greedily while the summed word count stays within the maximum.

    The sum is Elasticsearch's rule; it never undercounts, since joining two texts can only join
    words, never create more.
    """
    merged: list[tuple[int, int, int]] = []
    for a, b, words in pieces:
        if merged and merged[-1][2] + words <= max_words:
            prev_a, _, prev_words = merged[-1]
            merged[-1] = (prev_a, b, prev_words + words)
        else:
            merged.append((a, b, words))
    return merged


def _sentence_chunks(body: str, start: int, end: int, max_words: int, lang: str) -> list[Span]:
    """Pack sentences greedily up to the maximum; cut a sentence over it at word starts.

    Each chunk after the first starts at a sentence (or word) start; the whitespace before it
    ends the previous chunk. The first chunk starts at `start`, the last ends at `end`.
    """
    units: list[tuple[int, int]] = []  # (start offset of the unit, words in it)
    for s, e in sentence_spans(body[start:end], lang=lang):
        s, e = start + s, start + e
        words = [s + w for w, _ in word_spans(body[s:e])]
        if len(words) <= max_words:
            units.append((s, len(words)))
            continue
        # A giant sentence: pieces of max_words words, each after the first at a word start.
        starts = [s, *words[max_words::max_words]]
        units.extend((u, min(max_words, len(words) - k * max_words)) for k, u in enumerate(starts))
    cuts: list[int] = []
    total = 0
    for i, (s, words) in enumerate(units):
        if i > 0 and total + words > max_words:
            cuts.append(s)
            total = 0
        total += words
    bounds = [start, *cuts, end]
    return list(itertools.pairwise(bounds))


def _fold_wordless(body: str, spans: list[Span]) -> list[Span]:
    """Fold chunks without a word into the next chunk (the previous one for the last chunk).

    Such a chunk (whitespace, `---`, a lone fence line) would embed as noise; folding adds 0
    words to its neighbour, so the maximum still holds and the tiling is unchanged.
    """
    out: list[Span] = []
    carry: int | None = None
    for a, b in spans:
        if carry is not None:
            a, carry = carry, None
        if count_words(body, a, b) == 0:
            carry = a
            continue
        out.append((a, b))
    if carry is not None:
        if out:
            out[-1] = (out[-1][0], len(body))
        else:
            out.append((carry, len(body)))
    return out


def _to_chunk_spans(body: str, content: list[Span], overlap: int, lang: str) -> list[ChunkSpan]:
    """Attach overlap and `has_code` to the content ranges."""
    code = _code_ranges(body)
    result: list[ChunkSpan] = []
    for i, (a, b) in enumerate(content):
        start = a
        if overlap > 0 and i > 0:
            prev_a, prev_b = content[i - 1]
            sentences = sentence_spans(body[prev_a:prev_b], lang=lang)
            if sentences:
                start = prev_a + sentences[max(0, len(sentences) - overlap)][0]
        has_code = any(cs < b and a < ce for cs, ce in code)
        result.append(ChunkSpan(char_start=start, char_end=b, content_start=a, has_code=has_code))
    return result


def _code_ranges(body: str) -> list[Span]:
    """Fenced code blocks of the body (fence lines included), for `has_code` (R9).

    The shared fence scan (`text.fence_spans`, fences in quotes and list items too) is enough here:
    the recursive strategy does not parse Markdown, and a chunk cut inside a code block still
    contains code.
    """
    return [(fence.start, fence.end) for fence in fence_spans(body)]


def _guarded_content_spans(
    body: str, settings: RecursiveSettings, lang: str, note_path: str, time_limit: float
) -> list[Span]:
    """Run `_content_spans` in a forked child and kill it after `time_limit` seconds.

    `re` holds the GIL and ignores other threads while it backtracks, so only another process
    can be stopped safely. The child reports each separator it starts, so the error can name
    the pattern that was running. One fork per over-max note costs about 7 ms.
    """
    patterns = separators_of(settings)
    read_fd, write_fd = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child's coverage is not collected
        os.close(read_fd)
        status = 0
        try:
            with os.fdopen(write_fd, "wb", buffering=0) as pipe:
                try:
                    spans = _content_spans(
                        body,
                        patterns,
                        settings.max_chunk_size,
                        lang,
                        on_pattern=lambda level: pipe.write(b"P%d\n" % level),
                    )
                    pipe.write(b"R" + json.dumps(spans).encode() + b"\n")
                except BaseException as exc:
                    pipe.write(b"E" + json.dumps(f"{type(exc).__name__}: {exc}").encode() + b"\n")
                    status = 1
        finally:
            os._exit(status)
    os.close(write_fd)
    deadline = time.monotonic() + time_limit
    buffer = b""
    level: int | None = None
    try:
        with os.fdopen(read_fd, "rb", buffering=0) as pipe:
            while True:
                remaining = deadline - time.monotonic()
                if remaining <= 0 or not select.select([pipe], [], [], remaining)[0]:
                    raise ChunkingError(note_path, _timeout_message(patterns, level, time_limit))
                data = pipe.read(65536)
                if not data:
                    raise ChunkingError(note_path, "recursive chunking stopped without a result")
                buffer += data
                *lines, buffer = buffer.split(b"\n")
                for line in lines:
                    kind, payload = line[:1], line[1:]
                    if kind == b"P":
                        level = int(payload)
                    elif kind == b"R":
                        return [(a, b) for a, b in json.loads(payload)]
                    else:
                        raise ChunkingError(note_path, f"recursive chunking failed: {json.loads(payload)}")
    finally:
        _reap(pid)


def _reap(pid: int) -> None:
    """Kill the child if it still runs and collect it, so no zombie is left behind."""
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGKILL)
    os.waitpid(pid, 0)


def _timeout_message(patterns: Sequence[str], level: int | None, time_limit: float) -> str:
    if level is None or level < 0:
        where = "the sentence fallback" if level == -1 else "the separators"
        return f"recursive chunking took longer than {time_limit:g}s in {where}"
    return (
        f"separator [{patterns[level]}] took longer than {time_limit:g}s; it likely "
        "backtracks catastrophically (nested quantifiers such as (a+)+); simplify it or raise the limit"
    )
