"""Where `chunk_note`'s time goes: each stage timed on its own over the same notes, without a profiler.

cProfile's per-call overhead inflates the many small Python calls (leaves, sentences) against the few
C calls (sentencepiece, pyromark), so its split misleads exactly where the floor-to-us gap is. Here
every stage runs alone on inputs prepared beforehand (the note's blocks, token pass, spans, texts),
best of `--rounds` passes of process CPU time, and the stages are printed beside the whole
`chunk_note` and the floor (one pyromark parse + one sentencepiece pass) of the same notes.

Stages nest: an indented row is part of the row above it, so the rows do not add up to the total.
`events_with_range` returns a lazy iterator, so the floor (as `chunking.py` times it) never builds the
events' Python objects that any Python reader of the parse must build; the `iterated` row shows that cost.
The `inside` rows are measured by recording the calls a stage makes on one pass and replaying them.

    .venv/bin/python bench/chunk_stages.py [--limit 600] [--rounds 3] [--corpus DIR]
"""

from __future__ import annotations

import argparse
import dataclasses
import gc
import os
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pyromark

from _common import MSDOCS, megabytes, table
from mindnet import markdown
from mindnet.chunking import base, structure
from mindnet.chunking.base import STABLE_KEY_TOKENS, ChunkSpan, finalize
from mindnet.chunking.pipeline import chunk_note, chunk_spans, parse
from mindnet.chunking.sentences import sentence_spans
from mindnet.chunking.tokens import NoteTokens, Tokenizer, default_tokenizer
from mindnet.config import Settings
from mindnet.language import chunk_languages
from mindnet.markdown import PYROMARK_OPTIONS, parse_blocks
from mindnet.text import content_hash, line_starts, normalise
from mindnet.vault import Note, read_vault


def best_cpu(run: Callable[[], object], rounds: int, collector: bool = False) -> float:
    """Least process CPU seconds of `rounds` calls of `run`, with the cyclic collector off while timing
    unless `collector` (its passes depend on everything else alive in the process, not on the stage)."""
    times = []
    for _ in range(rounds):
        gc.collect()
        if not collector:
            gc.disable()
        began = time.process_time()
        run()
        times.append(time.process_time() - began)
        gc.enable()
    return min(times)


def recorded(module: Any, name: str, run: Callable[[], object]) -> list[tuple[tuple[Any, ...], dict[str, Any]]]:
    """The arguments of every call `run` makes to `module.name`, so that the calls can be replayed alone."""
    original = getattr(module, name)
    calls: list[tuple[tuple[Any, ...], dict[str, Any]]] = []

    def spy(*args: Any, **kwargs: Any) -> Any:
        calls.append((args, kwargs))
        return original(*args, **kwargs)

    setattr(module, name, spy)
    try:
        run()
    finally:
        setattr(module, name, original)
    return calls


Calls = Sequence[tuple[tuple[Any, ...], dict[str, Any]]]


def replay(function: Callable[..., object], calls: Calls) -> Callable[[], None]:
    """A callable that makes every recorded call again."""

    def run() -> None:
        for args, kwargs in calls:
            function(*args, **kwargs)

    return run


def stages(notes: Sequence[Note], settings: Settings, tok: Tokenizer) -> list[tuple[str, Callable[[], object]]]:
    """(label, callable) per stage, each over all notes with its inputs made beforehand."""
    bodies = [n.fulltext for n in notes]
    parser = pyromark.Markdown(options=PYROMARK_OPTIONS)
    sp = tok.processor
    parsed = [parse(n, tok, links=False) for n in notes]
    spans = [chunk_spans(p, settings, tok) for p in parsed]
    texts = [[normalise(b[s.char_start : s.char_end]) for s in ss] for b, ss in zip(bodies, spans, strict=True)]
    counts = [[p.tokens.count(s.char_start, s.char_end) for s in ss] for p, ss in zip(parsed, spans, strict=True)]
    masked = [markdown.mask_comments(b) for b in bodies]
    pyro_inputs = [_pyromark_input(b) for b in bodies]
    raws = [markdown._pyromark_blocks(t) for t in pyro_inputs]

    def each(work: Callable[[int], object]) -> Callable[[], None]:
        return lambda: [work(i) for i in range(len(notes))]

    def cold() -> None:
        """Forget the counts each note's token pass has cached, as a fresh `chunk_note` starts."""
        for p in parsed:
            p.tokens._cache.clear()

    def structure_pass() -> None:
        cold()
        for p in parsed:
            chunk_spans(p, settings, tok)

    def finalize_pass() -> None:
        cold()
        for p, ss in zip(parsed, spans, strict=True):
            finalize(p.note, ss, tok, lang, blocks=p.blocks, tokens=p.tokens, cache_dir=settings.cache_dir)

    def counts_pass() -> None:
        cold()
        for p, ss in zip(parsed, spans, strict=True):
            [p.tokens.count(s.char_start, s.char_end) for s in ss]

    def heads_pass() -> None:
        # `base._heads` (heads from the note's pass where exact) where this checkout has it, else the
        # encoder for every chunk, as finalize did before it.
        heads = getattr(base, "_heads", None)
        cold()
        for p, ss, ts, cs in zip(parsed, spans, texts, counts, strict=True):
            if heads is None:
                tok.head_ids_many(ts, STABLE_KEY_TOKENS, cs)
            else:
                heads(tok, p.tokens, ss, ts, cs)

    lang = settings.languages
    leaves_calls = recorded(structure, "_leaves", structure_pass)
    sentence_calls = recorded(structure, "sentence_spans", structure_pass)
    block_calls = recorded(structure, "block_leaves", structure_pass)
    count_calls = recorded(NoteTokens, "count", structure_pass)
    return [
        ("floor: pyromark events + sp.encode(body)", each(lambda i: (
            parser.events_with_range(bodies[i], merge_text=True), sp.encode(bodies[i])))),
        ("  pyromark events_with_range (lazy, as the floor)", each(
            lambda i: parser.events_with_range(bodies[i], merge_text=True))),
        ("  pyromark events, iterated", each(lambda i: list(parser.events_with_range(bodies[i], merge_text=True)))),
        ("  sp.encode(body)", each(lambda i: sp.encode(bodies[i]))),
        ("chunk_note (structure, no links)", each(lambda i: chunk_note(notes[i], settings, None, tok))),
        ("chunk_note, collector on (as in chunking.py)", each(lambda i: chunk_note(notes[i], settings, None, tok))),
        ("  parse_blocks", each(lambda i: parse_blocks(bodies[i]))),
        ("    mask_comments + math regions + mask", each(lambda i: _pyromark_input(bodies[i]))),
        ("    _pyromark_blocks (events incl.)", each(lambda i: markdown._pyromark_blocks(pyro_inputs[i]))),
        ("    _as_reference + _finish", each(lambda i: markdown._finish(
            masked[i], markdown._as_reference(masked[i], [dataclasses.replace(r) for r in raws[i]], [])))),
        ("  tokenizer.note (NoteTokens)", each(lambda i: tok.note(bodies[i]))),
        ("    sp.encode(lines)", each(lambda i: sp.encode(bodies[i].split("\n"), num_threads=1))),
        ("  chunk_structure (given blocks, tokens)", structure_pass),
        ("    _leaves", replay(structure._leaves, leaves_calls)),
        ("      block_leaves", replay(structure.block_leaves, block_calls)),
        ("        sentence_spans", replay(sentence_spans, sentence_calls)),
        ("    NoteTokens.count (structure's calls)", lambda: (cold(), replay(NoteTokens.count, count_calls)())),
        ("  finalize (given spans)", finalize_pass),
        ("    normalise chunk texts", each(lambda i: [
            normalise(bodies[i][s.char_start : s.char_end]) for s in spans[i]])),
        ("    chunk counts", counts_pass),
        ("    chunk_languages", each(lambda i: chunk_languages(texts[i], notes[i].lang, lang, settings.cache_dir))),
        ("    stable-key heads", heads_pass),
        ("    line_starts", each(lambda i: line_starts(bodies[i]))),
        ("    text hashes", each(lambda i: [content_hash(t) for t in texts[i]])),
        ("    section fields (headings)", each(lambda i: _headings(parsed[i].blocks, spans[i]))),
    ]


def _pyromark_input(body: str) -> str:
    """What `parse_blocks` hands pulldown-cmark: comments masked, then math regions masked."""
    masked = markdown.mask_comments(body)
    return markdown._mask_regions(masked, markdown._math_regions(masked))


def _headings(blocks: Sequence[markdown.Block], spans: Sequence[ChunkSpan]) -> object:
    """What finalize does for section fields a strategy left open (nothing for `structure`)."""
    if any(s.section_path is None for s in spans):
        return base._section_headings(blocks)
    return None


def main() -> None:
    """Read the corpus, time every stage, print the table with each stage's share of chunk_note."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", type=Path, default=MSDOCS)
    parser.add_argument("--limit", type=int, default=600)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    settings = Settings()
    tok = default_tokenizer()
    notes = list(read_vault(args.corpus, settings).notes[: args.limit])
    mb = megabytes([n.fulltext for n in notes])
    for n in notes[:5]:
        chunk_note(n, settings, None, tok)  # warm-up: language model, lazy imports
    rows = []
    total = None
    for label, run in stages(notes, settings, tok):
        seconds = best_cpu(run, args.rounds, collector="collector on" in label)
        if label.startswith("chunk_note (structure"):
            total = seconds
        rows.append([label, seconds, mb / seconds if seconds else None])
    assert total is not None
    print(f"{len(notes)} notes, {mb:.2f} MB from {args.corpus}, best of {args.rounds} (process CPU s), "
          f"load average {os.getloadavg()[0]:.1f}\n")
    print(table(["stage", "CPU s", "MB/s", "% of chunk_note"], [[*r, 100 * r[1] / total] for r in rows]))


if __name__ == "__main__":
    main()
