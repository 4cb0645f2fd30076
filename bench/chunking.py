"""Chunking speed and chunk quality of mindnet against three popular splitters, in one run.

Issue goal: mindnet's `structure` strategy at least as fast as the fastest peer, with zero invariant
violations. Every chunker gets the same note bodies (frontmatter stripped by mindnet's own vault
reader), the same token counter (the USE sentencepiece model, `default_tokenizer().count`, BOS/EOS
included) and the same size target (the default profile's max, 400 tokens, no overlap for peers).

Peers:
- semantic-text-splitter `MarkdownSplitter.from_callback(count, 400)` (Rust, Markdown-aware).
- LangChain `MarkdownHeaderTextSplitter` (#, ##, ###; headers kept) then
  `RecursiveCharacterTextSplitter(chunk_size=400, chunk_overlap=0, length_function=count)`.
- Chonkie `RecursiveChunker(tokenizer=..., chunk_size=400)` with its default rules. Its last rule
  encodes and decodes tokens, which a bare callable cannot do, so it gets `_ChonkieTokenizer`: the
  same sentencepiece model whose "ids" are piece indices, decoded by slicing the original text.
  Its Markdown recipe is not used because loading it downloads from the Hugging Face hub.

Timing: only the chunking calls over in-memory bodies, best of `--rounds` passes, the chunkers
interleaved in rotating order inside every round so that load on the shared machine hits all of
them alike. Both wall and process CPU seconds are kept: every chunker here runs on one thread, so
on an overloaded machine CPU time is the figure that does not depend on what else runs.
`mindnet structure` is the bare `chunk_structure` (spans); `mindnet chunk_note` is the
importer's full per-note pipeline (spans + finalize: text, ids, hashes, per-chunk language).

Floor: `floor (1 parse + 1 tokenize)` is one pyromark parse (events with ranges, the extensions
mindnet enables) plus one sentencepiece pass over each body, the least any structure- and
token-aware chunker must do; it is timed in the same rounds, and mindnet's time is printed as a
ratio to it and to each peer.

Quality: peer chunks carry no offsets we can trust across peers, so each chunk's text is located
in the body by a sequential search that ignores whitespace (LangChain rewrites line breaks and
indentation); the spans then go through `mindnet.chunking.invariants.check_chunks`, the same
checker the test suite runs on mindnet. A peer span over max is flagged `oversize`, so a single
uncuttable block over max is allowed for peers exactly as for mindnet. Peers promise no overlap,
so their content starts at their chunk starts (a span reaching back into the previous one is
reported as out of order).

The process (`--cli`): `mindnet-chunk FOLDER > file` as a user runs it (interpreter start, reading,
parsing, chunking, JSON), once per `--cli-jobs` value (0 = its own choice from cores and load), with
wall seconds and the CPU seconds of the process and its workers. The floor's time on the same files
is measured in the same run, in this process: read every file, one pyromark parse, one
sentencepiece pass. A run with workers is a wall figure of several processes, so it is printed as
such and never as the MB/s of one chunker; the table above stays single-process CPU.

    .venv/bin/python bench/chunking.py [--limit N] [--rounds R] [--json] [--corpus DIR]
        [--cli] [--cli-folder DIR] [--cli-jobs 1,0]
"""

from __future__ import annotations

import argparse
import gc
import os
import re
import resource
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyromark
from chonkie import RecursiveChunker
from chonkie.tokenizer import Tokenizer as ChonkieTokenizerBase
from langchain_text_splitters import MarkdownHeaderTextSplitter, RecursiveCharacterTextSplitter
from semantic_text_splitter import MarkdownSplitter

from _common import MSDOCS, dump_json, megabytes, table
from mindnet.chunking.base import Chunk
from mindnet.chunking.invariants import check_chunks
from mindnet.chunking.pipeline import chunk_note
from mindnet.chunking.structure import chunk_structure
from mindnet.chunking.tokens import Tokenizer, default_tokenizer
from mindnet.config import Profile, Settings
from mindnet.markdown import PYROMARK_OPTIONS, Block, parse_blocks
from mindnet.text import normalise
from mindnet.vault import Note, read_vault

MINDNET = ("mindnet structure", "mindnet chunk_note")
FLOOR = "floor (1 parse + 1 tokenize)"
_WS = re.compile(r"\s+")


@dataclass(frozen=True, slots=True)
class PeerSpan:
    """A peer chunk located in the body, in the shape `check_chunks` reads (`SpanLike`)."""

    char_start: int
    char_end: int
    content_start: int
    oversize: bool


@dataclass(slots=True)
class Result:
    """Figures for one chunker over the whole input."""

    name: str
    seconds: list[float] = field(default_factory=list)
    cpu: list[float] = field(default_factory=list)
    """Process CPU seconds of each pass: on a shared, overloaded machine the fairer figure."""
    chunks: int = 0
    tokens: int = 0
    max_tokens: int = 0
    over_max: int = 0
    unmapped: int = 0
    violations: Counter[str] = field(default_factory=Counter)
    notes_with_violations: int = 0
    examples: list[str] = field(default_factory=list)

    @property
    def best(self) -> float:
        return min(self.seconds)

    @property
    def best_cpu(self) -> float:
        return min(self.cpu)


class _ChonkieTokenizer(ChonkieTokenizerBase):
    """Chonkie's tokenizer protocol over mindnet's sentencepiece tokenizer, exact round trip.

    Why not a plain callable: chonkie's last recursion level splits by token ids and decodes them,
    which its callable adapter refuses. Sentencepiece's own `decode` would not give back the original
    characters (NFKC, whitespace), so the "ids" here are piece indices into the text encoded last and
    `decode` slices that text: chunks stay substrings of the body, as chonkie assumes for offsets.
    """

    def __init__(self, tokenizer: Tokenizer) -> None:
        super().__init__()
        self._tok = tokenizer
        self._text = ""
        self._spans: list[tuple[int, int]] = []

    def __repr__(self) -> str:
        return "_ChonkieTokenizer(use-sentencepiece)"

    def encode(self, text: str) -> list[int]:
        self._text, self._spans = text, self._tok.pieces(text)
        return list(range(len(self._spans)))

    def decode(self, tokens: Sequence[int]) -> str:
        if not tokens:
            return ""
        return self._text[self._spans[tokens[0]][0] : self._spans[tokens[-1]][1]]

    def encode_batch(self, texts: Sequence[str]) -> list[list[int]]:
        raise NotImplementedError("piece indices refer to the text encoded last; encode one text at a time")

    def decode_batch(self, token_sequences: Sequence[Sequence[int]]) -> list[str]:
        return [self.decode(t) for t in token_sequences]

    def tokenize(self, text: str) -> list[str]:
        return [text[s:e] for s, e in self._tok.pieces(text)]

    def count_tokens(self, text: str) -> int:
        return self._tok.count(text)

    def count_tokens_batch(self, texts: Sequence[str]) -> list[int]:
        return self._tok.count_many(texts)


def make_chunkers(settings: Settings, profile: Profile, tok: Tokenizer) -> dict[str, Callable[[Note], list[Any]]]:
    """Name -> the one call that is timed for a note: mindnet's two levels and the three peers."""
    sts = MarkdownSplitter.from_callback(tok.count, profile.max, overlap=0, trim=True)
    headers = MarkdownHeaderTextSplitter([("#", "h1"), ("##", "h2"), ("###", "h3")], strip_headers=False)
    recursive = RecursiveCharacterTextSplitter(chunk_size=profile.max, chunk_overlap=0, length_function=tok.count)
    chonkie = RecursiveChunker(tokenizer=_ChonkieTokenizer(tok), chunk_size=profile.max)
    stops = settings.stop_sections
    parser = pyromark.Markdown(options=PYROMARK_OPTIONS)
    sp = tok.processor
    return {
        FLOOR: lambda n: [parser.events_with_range(n.fulltext, merge_text=True), sp.encode(n.fulltext)],
        "mindnet structure": lambda n: chunk_structure(
            n.fulltext, profile, stop_sections=stops, tokenizer=tok, lang=n.lang
        ),
        "mindnet chunk_note": lambda n: chunk_note(n, settings, None, tok),
        "semantic-text-splitter": lambda n: sts.chunks(n.fulltext),
        "langchain md-header+recursive": lambda n: [
            d.page_content for d in recursive.split_documents(headers.split_text(n.fulltext))
        ],
        "chonkie recursive": lambda n: [c.text for c in chonkie.chunk(n.fulltext)],
    }


def locate(body: str, pieces: Sequence[str]) -> tuple[list[tuple[int, int]], int]:
    """Char spans of peer chunks in `body`, found in order while ignoring whitespace.

    Returns the spans of the chunks found and how many could not be found at all (a peer that
    rewrote non-whitespace text). The search resumes after the previous match, and falls back to
    the whole body only when that fails, so a repeated paragraph maps to its own occurrence.
    """
    keep = [m.start() for m in re.finditer(r"\S", body)]
    compact = _WS.sub("", body)
    spans: list[tuple[int, int]] = []
    cursor = missing = 0
    for piece in pieces:
        needle = _WS.sub("", piece)
        if not needle:
            continue
        k = compact.find(needle, cursor)
        if k < 0:
            k = compact.find(needle)
        if k < 0:
            missing += 1
            continue
        spans.append((keep[k], keep[k + len(needle) - 1] + 1))
        cursor = k + len(needle)
    return spans, missing


def peer_spans(body: str, spans: Sequence[tuple[int, int]], counts: Sequence[int], profile: Profile) -> list[PeerSpan]:
    """Spans as `check_chunks` sees them: no overlap claimed, `oversize` exactly when over max."""
    out: list[PeerSpan] = []
    prev_end = 0
    for (s, e), n in zip(spans, counts, strict=True):
        out.append(PeerSpan(s, e, min(max(s, prev_end), e), n > profile.max))
        prev_end = max(prev_end, e)
    return out


_KINDS: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"^chunk \d+: overlap"), "overlap rule (R10)"),
    (re.compile(r"inside a fence inside a"), "cut inside code"),
    (re.compile(r"inside a code"), "cut inside code"),
    (re.compile(r"inside a (\w+)"), "cut inside a {0}"),
    (re.compile(r"tokens > max"), "over max, not flagged oversize"),
    (re.compile(r"oversize with"), "over max, more than one unit"),
    (re.compile(r"oversize but only"), "oversize flag on a small chunk"),
    (re.compile(r"in no chunk|after the last chunk"), "text in no chunk"),
    (re.compile(r"does not start a chunk cleanly"), "H2/H3 not starting a chunk"),
    (re.compile(r"before the previous chunk's end"), "chunk overlaps the previous"),
    (re.compile(r"offsets out of order"), "empty or reversed span"),
    (re.compile(r"text differs|token_count"), "record text/count mismatch"),
)


def violation_kind(message: str) -> str:
    """Group a checker message into a kind, so the table shows what breaks, not every position."""
    for pattern, label in _KINDS:
        m = pattern.search(message)
        if m:
            return label.format(*m.groups())
    return re.sub(r"\d+", "N", message)[:60]


def time_all(
    notes: Sequence[Note], chunkers: dict[str, Callable[[Note], list[Any]]], rounds: int
) -> tuple[dict[str, Result], dict[str, list[list[Any]]]]:
    """Best-of-`rounds` seconds per chunker, interleaved, and the output of the last pass of each."""
    results = {name: Result(name) for name in chunkers}
    outputs: dict[str, list[list[Any]]] = {}
    names = list(chunkers)
    for r in range(rounds):
        order = names[r % len(names) :] + names[: r % len(names)]
        for name in order:
            run = chunkers[name]
            gc.collect()
            began, cpu = time.perf_counter(), time.process_time()
            out = [run(n) for n in notes]
            results[name].seconds.append(time.perf_counter() - began)
            results[name].cpu.append(time.process_time() - cpu)
            outputs[name] = out
            print(f"  round {r + 1}: {name:30s} {results[name].seconds[-1]:7.2f} s", file=sys.stderr)
    return results, outputs


def check_all(
    notes: Sequence[Note],
    blocks: Sequence[list[Block]],
    results: dict[str, Result],
    outputs: dict[str, list[list[Any]]],
    profile: Profile,
    tok: Tokenizer,
) -> None:
    """Sizes and invariant violations of every chunker's last output, all under `check_chunks`."""
    for name, per_note in outputs.items():
        if name == FLOOR:
            continue
        res = results[name]
        for note, note_blocks, out in zip(notes, blocks, per_note, strict=True):
            body = note.fulltext
            if name in MINDNET:
                spans: Sequence[Any] = out
                counts = (
                    [c.token_count for c in out]
                    if out and isinstance(out[0], Chunk)
                    else tok.count_many([normalise(body[s.char_start : s.char_end]) for s in out])
                )
            else:
                located, missing = locate(body, out)
                res.unmapped += missing
                counts = tok.count_many([normalise(body[s:e]) for s, e in located])
                spans = peer_spans(body, located, counts, profile)
            res.chunks += len(out)
            res.tokens += sum(counts)
            res.max_tokens = max([res.max_tokens, *counts])
            res.over_max += sum(1 for n in counts if n > profile.max)
            found = check_chunks(body, spans, tok, profile, lang=note.lang, blocks=note_blocks)
            if len(out) > len(spans):
                found.extend(["peer chunk text not found in the body"] * (len(out) - len(spans)))
            if found:
                res.notes_with_violations += 1
                res.violations.update(violation_kind(v) for v in found)
                if len(res.examples) < 3:
                    res.examples.append(f"{note.path}: {found[0]}")
        print(f"  checked {name}", file=sys.stderr)


@dataclass(frozen=True, slots=True)
class ProcessRun:
    """One timed `mindnet-chunk` process over a folder."""

    jobs: int
    """`--jobs` given (0: the process chose from cores and load)."""
    wall: float
    cpu: float
    """User + system seconds of the process and every worker it waited for."""
    chunks: int


def floor_on_files(files: Sequence[Path]) -> tuple[float, float, float]:
    """Wall and CPU seconds of read + one pyromark parse + one sentencepiece pass per file, and its MB."""
    parser = pyromark.Markdown(options=PYROMARK_OPTIONS)
    sp = default_tokenizer().processor
    gc.collect()
    began, cpu = time.perf_counter(), time.process_time()
    size = 0
    for path in files:
        text = path.read_text(encoding="utf-8")
        size += len(text.encode("utf-8"))
        parser.events_with_range(text, merge_text=True)
        sp.encode(text)
    return time.perf_counter() - began, time.process_time() - cpu, size / 1e6


def run_cli(folder: Path, jobs: int) -> ProcessRun:
    """`mindnet-chunk --jobs N FOLDER`, stdout to a file, timed from outside as a user waits for it."""
    exe = Path(sys.executable).with_name("mindnet-chunk")
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    with tempfile.TemporaryFile("w+b") as out:
        began = time.perf_counter()
        done = subprocess.run([str(exe), "--jobs", str(jobs), str(folder)], stdout=out, stderr=subprocess.PIPE,
                              check=False)
        wall = time.perf_counter() - began
        out.seek(0)
        chunks = sum(1 for _ in out)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode not in (0, 1):
        sys.exit(f"mindnet-chunk failed ({done.returncode}): {done.stderr.decode(errors='replace')[-400:]}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return ProcessRun(jobs, wall, cpu, chunks)


def cli_section(folder: Path, jobs_list: Sequence[int]) -> dict[str, Any]:
    """Floor and `mindnet-chunk` runs on one folder, interleaved floor first; figures and ratios."""
    files = sorted(p for p in folder.rglob("*.md") if p.is_file())
    print(f"  cli: floor over {len(files)} files", file=sys.stderr)
    floor_on_files(files[:50])  # warm-up: page cache, tokenizer
    floor_wall, floor_cpu, mb = floor_on_files(files)
    runs = []
    for jobs in jobs_list:
        print(f"  cli: mindnet-chunk --jobs {jobs}", file=sys.stderr)
        runs.append(run_cli(folder, jobs))
    return {
        "folder": str(folder),
        "files": len(files),
        "megabytes": round(mb, 3),
        "floor": {"wall_seconds": round(floor_wall, 3), "cpu_seconds": round(floor_cpu, 3)},
        "runs": [
            {
                "jobs": r.jobs,
                "wall_seconds": round(r.wall, 3),
                "cpu_seconds": round(r.cpu, 3),
                "chunks": r.chunks,
                "wall_over_floor": round(r.wall / floor_wall, 3),
                "cpu_over_floor": round(r.cpu / floor_cpu, 3),
            }
            for r in runs
        ],
        "load_average": os.getloadavg(),
    }


def print_cli(section: dict[str, Any]) -> None:
    """The process table: wall figures of whole processes against the floor's, labelled as such."""
    floor = section["floor"]
    print(f"\nmindnet-chunk as a process on {section['folder']} ({section['files']} files, "
          f"{section['megabytes']:.2f} MB), load average {section['load_average'][0]:.1f}\n")
    rows = [["floor (read + 1 parse + 1 tokenize, in-process, 1 process)", floor["wall_seconds"], floor["cpu_seconds"],
             section["megabytes"] / floor["wall_seconds"], 1.0, 1.0, 0]]
    for r in section["runs"]:
        label = "mindnet-chunk --jobs " + (str(r["jobs"]) if r["jobs"] else "0 (auto)") + ", whole process"
        rows.append([label, r["wall_seconds"], r["cpu_seconds"], section["megabytes"] / r["wall_seconds"],
                     r["wall_over_floor"], r["cpu_over_floor"], r["chunks"]])
    print(table(["run", "wall s", "CPU s (all processes)", "MB/s wall", "wall / floor", "CPU / floor", "chunks"], rows))
    print("(a run with workers: its MB/s is several processes' throughput, not one chunker's; "
          "goal: wall / floor <= 3)")


def main() -> None:
    """Parse options, read the corpus once, time every chunker, check every output, print."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", type=Path, default=MSDOCS, help="vault folder (default: msdocs-skype-teams-de)")
    parser.add_argument("--limit", type=int, default=None, help="first N notes (sorted by path)")
    parser.add_argument("--rounds", type=int, default=3, help="timed passes per chunker (best is kept)")
    parser.add_argument("--json", action="store_true", help="print one JSON document instead of tables")
    parser.add_argument("--cli", action="store_true", help="also time mindnet-chunk as a process against the floor")
    parser.add_argument("--cli-folder", type=Path, default=MSDOCS / "docs", help="folder for --cli (msdocs docs/)")
    parser.add_argument("--cli-jobs", default="1,0", help="--jobs values for --cli, comma-separated (0: auto)")
    args = parser.parse_args()

    settings = Settings()
    profile = settings.profiles["default"]
    tok = default_tokenizer()
    vault = read_vault(args.corpus, settings)
    notes = list(vault.notes[: args.limit] if args.limit else vault.notes)
    other = sorted({n.type for n in notes if settings.profile_for(n.type) != profile})
    if other:
        sys.exit(f"notes of types {other} have their own profile; this bench compares at the default profile only")
    texts = [n.fulltext for n in notes]
    mb = megabytes(texts)
    print(f"{len(notes)} notes, {mb:.2f} MB of bodies from {args.corpus}", file=sys.stderr)

    chunkers = make_chunkers(settings, profile, tok)
    for run in chunkers.values():  # warm-up: lazy imports, language model, splitter caches
        for n in notes[:5]:
            run(n)
    results, outputs = time_all(notes, chunkers, args.rounds)
    blocks = [parse_blocks(t) for t in texts]
    check_all(notes, blocks, results, outputs, profile, tok)

    peers = [r for name, r in results.items() if name not in (*MINDNET, FLOOR)]
    floor = results[FLOOR]
    fastest = min(peers, key=lambda r: r.best)
    ratios = {name: fastest.best / results[name].best for name in MINDNET}
    report = {
        "corpus": str(args.corpus),
        "notes": len(notes),
        "megabytes": round(mb, 3),
        "rounds": args.rounds,
        "profile": {"max": profile.max, "target": [profile.target_min, profile.target_max]},
        "load_average": os.getloadavg(),
        "fastest_peer": fastest.name,
        "ratio_to_fastest_peer": {k: round(v, 3) for k, v in ratios.items()},
        "time_over_floor": {name: round(results[name].best / floor.best, 3) for name in MINDNET},
        "cpu_over_floor": {name: round(results[name].best_cpu / floor.best_cpu, 3) for name in MINDNET},
        "time_over_peer": {
            name: {p.name: round(results[name].best / p.best, 3) for p in peers} for name in MINDNET
        },
        "chunkers": {
            r.name: {
                "best_seconds": round(r.best, 3),
                "all_seconds": [round(s, 3) for s in r.seconds],
                "best_cpu_seconds": round(r.best_cpu, 3),
                "mb_per_cpu_s": round(mb / r.best_cpu, 3),
                "mb_per_s": round(mb / r.best, 3),
                "chunks_per_s": round(r.chunks / r.best, 1),
                "chunks": r.chunks,
                "mean_tokens": round(r.tokens / max(r.chunks, 1), 1),
                "max_tokens": r.max_tokens,
                "chunks_over_max": r.over_max,
                "unmapped_chunks": r.unmapped,
                "violations": sum(r.violations.values()),
                "notes_with_violations": r.notes_with_violations,
                "violations_by_kind": dict(r.violations.most_common()),
                "examples": r.examples,
            }
            for r in results.values()
        },
    }
    cli = cli_section(args.cli_folder, [int(j) for j in args.cli_jobs.split(",")]) if args.cli else None
    if cli is not None:
        report["cli"] = cli
    if args.json:
        dump_json(report)
        return
    print(f"\n{len(notes)} notes, {mb:.2f} MB, max {profile.max} tokens (USE sentencepiece, BOS/EOS included), "
          f"best of {args.rounds} interleaved rounds, load average {os.getloadavg()[0]:.1f}\n")
    rows = [
        [r.name, mb / r.best, mb / r.best_cpu, r.chunks / r.best, r.chunks, r.tokens / max(r.chunks, 1), r.max_tokens,
         r.over_max, sum(r.violations.values()), r.notes_with_violations, r.best, r.best_cpu]
        for r in results.values()
    ]
    print(table(["chunker", "MB/s", "MB/s CPU", "chunks/s", "chunks", "mean tok", "max tok", ">max", "violations",
                 "notes w/ viol", "best s", "best CPU s"], rows))
    kinds = sorted({k for r in results.values() for k in r.violations})
    if kinds:
        print("\nviolations by kind (check_chunks, same checker for all)\n")
        print(table(["kind", *results], [[k, *(r.violations.get(k, 0) for r in results.values())] for k in kinds]))
    print(f"\nfastest peer: {fastest.name} ({mb / fastest.best:.3f} MB/s)")
    for name, ratio in ratios.items():
        print(f"{name} / fastest peer: {ratio:.2f}x  (goal >= 1.00 with 0 violations)")
    print(f"\nfloor: {mb / floor.best:.3f} MB/s wall, {mb / floor.best_cpu:.3f} MB/s CPU "
          "(one pyromark parse + one sentencepiece pass per body)")
    for name in MINDNET:
        r = results[name]
        print(f"{name}: {mb / r.best:.3f} MB/s wall, {mb / r.best_cpu:.3f} MB/s CPU; "
              f"{r.best / floor.best:.2f}x the floor's wall time, {r.best_cpu / floor.best_cpu:.2f}x its CPU time "
              "(goal <= 2.5x)")
        print("  vs peers (wall, CPU): " + ", ".join(
            f"{p.name} {r.best / p.best:.2f}x, {r.best_cpu / p.best_cpu:.2f}x" for p in peers))
    for r in results.values():
        for example in r.examples[:1]:
            print(f"example {r.name}: {example}")
    if cli is not None:
        print_cli(cli)


if __name__ == "__main__":
    main()
