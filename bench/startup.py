"""Issue 26's figures in one run, each beside its floor measured in that run: how fast mindnet is to start.

```sh
nice -n 10 .venv/bin/python bench/startup.py                  # every figure, work folder /tmp/mindnet-startup
nice -n 10 .venv/bin/python bench/startup.py --runs 7 --edits 30
nice -n 10 .venv/bin/python bench/startup.py --only cold,serve
```

Everything runs as a user runs it: the `mindnet` console script of this venv, whole processes, wall
clock. Children get their own cache folder under `--work` (the built onnx graphs land there on the
first import and embed, which are not timed as start-up) and Python's bytecode cache on (a dev shell
with `PYTHONDONTWRITEBYTECODE=1` would otherwise make every process compile mindnet from source).
Nothing is written into the repository or the corpora.

Figures and their floors (bench/README.md has the table with what each one times):

- cold search, e5 not filled / filled: `mindnet search Q --vault V` without a server, the whole
  process; floor `python -c "import numpy, onnxruntime"`. A one-off search fuses the e5 list only
  when the settings ask for the tier (`quality_tier = true`): a third row times that.
- search via serve: the same command while `mindnet serve V` runs; floor `python -c pass`.
- serve's first API search after it says ready (`/api/health` "ok"); floor a later search.
- MCP initialize + tools/list and the first search, from spawning `mindnet mcp V` (the official
  SDK's client); floor a later search.
- no-op re-import: `mindnet import V`; floor `python -c "import numpy, onnxruntime"`.
- cold import of a German vault into an empty store; floor the encoder alone on the same texts (every
  chunk and every note window, both of which the import embeds), as a process of its own.
- save -> searchable during an e5 fill, p50 and p95; beside it the same with the tier complete.

V is about 180 short notes: copies of foam-docs/vault and zettlr-docs/docs (en and de). The German
vault of the cold import is a copy of rustbook-de/src. Medians over `--runs`, floors interleaved
with the runs they are the floor of.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import time
import urllib.parse
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

from _common import CORPORA, seconds_to_searchable, server_url

PYTHON = sys.executable
MINDNET = [str(Path(sys.executable).with_name("mindnet"))]
"""The command that runs mindnet (`--mindnet` replaces it, e.g. to time another checkout's entry point)."""
QUERIES = ("how do I link notes", "Wie exportiere ich nach PDF?", "daily notes template", "Zitate mit Zotero",
           "graph view of my notes")
FIGURES = ("cold", "noop", "serve", "mcp", "fill", "import")


def child_env(work: Path) -> dict[str, str]:
    """The environment of every timed process: a cache folder of the run's own, bytecode cache on."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("MINDNET_") and k != "PYTHONDONTWRITEBYTECODE"}
    env["XDG_CACHE_HOME"] = str(work / "cache")
    return env


def timed(cmd: list[str], env: dict[str, str], *, check: bool = True, out: Path | None = None) -> float:
    """Wall seconds of one process from spawn to exit (its stdout to `out`, or nowhere)."""
    started = time.perf_counter()
    with open(out or os.devnull, "w", encoding="utf-8") as sink:
        done = subprocess.run(cmd, env=env, stdout=sink, stderr=subprocess.PIPE, text=True)
    seconds = time.perf_counter() - started
    if check and done.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed ({done.returncode}): {done.stderr.strip()}")
    return seconds


def floor_numpy(env: dict[str, str]) -> float:
    return timed([PYTHON, "-c", "import numpy, onnxruntime"], env)


def floor_python(env: dict[str, str]) -> float:
    return timed([PYTHON, "-c", "pass"], env)


def paired(figure: Callable[[int], float], floor: Callable[[], float], runs: int) -> tuple[float, float]:
    """Medians of `runs` figure runs and `runs` floor runs, alternated."""
    values, floors = [], []
    for i in range(runs):
        floors.append(floor())
        values.append(figure(i))
    return statistics.median(values), statistics.median(floors)


def build_vault(root: Path) -> Path:
    """About 180 short notes (foam-docs and zettlr-docs), copied; re-made on every run."""
    shutil.rmtree(root, ignore_errors=True)
    root.mkdir(parents=True)
    shutil.copytree(CORPORA / "foam-docs" / "vault", root / "foam")
    shutil.copytree(CORPORA / "zettlr-docs" / "docs", root / "zettlr")
    return root


class Serve:
    """A `mindnet serve` process: when it said ready, and plain HTTP to it."""

    def __init__(self, vault: Path, env: dict[str, str], *args: str) -> None:
        self.vault = vault
        self.log = (vault.parent / f"serve-{time.monotonic_ns()}.log").open("w")
        self.spawned = time.perf_counter()
        self.proc = subprocess.Popen([*MINDNET, "serve", str(vault), "--port", "0", *args], env=env,
                                     stdout=self.log, stderr=subprocess.STDOUT)
        self.url = server_url(self.proc, self.vault / ".mindnet" / "server.json", 0.005)
        self.ready_after = self._ready()

    def _ready(self) -> float:
        """Seconds from spawn until `/api/health` says ok (it says "starting" while warming up)."""
        while self.get("/api/health")["status"] != "ok":
            time.sleep(0.005)
        return time.perf_counter() - self.spawned

    def get(self, path: str, **params: Any) -> Any:
        url = f"{self.url}{path}?{urllib.parse.urlencode(params, doseq=True)}" if params else self.url + path
        with urllib.request.urlopen(url, timeout=300) as response:
            return json.loads(response.read())

    def stop(self) -> None:
        self.proc.send_signal(signal.SIGTERM)
        self.proc.wait(timeout=300)
        self.log.close()


def search_seconds(server: Serve, query: str) -> float:
    started = time.perf_counter()
    server.get("/api/search", q=query, k=10)
    return time.perf_counter() - started


def save_to_searchable(server: Serve, vault: Path, edits: int, tag: str, during_fill: bool) -> tuple[list[float], int]:
    """Seconds from appending a fresh word to a note to a lexical search finding it; how many of the
    saves happened while the e5 fill was still running."""
    notes = sorted(p for p in vault.rglob("*.md") if ".mindnet" not in p.parts)
    seconds: list[float] = []
    filling = 0
    for i in range(edits):
        state = server.get("/api/status")["resident"]["e5"]
        filling += int(state["enabled"] and not state["complete"] and state["done"] < state["total"])
        note = notes[(i * 37) % len(notes)]
        word = f"zqx{tag}{i:04d}{os.getpid()}startup"
        seconds.append(seconds_to_searchable(server.get, note, word))
        time.sleep(0.3 if during_fill else 0.1)  # the fill resumes between saves, as it would between keystrokes
    return seconds, filling


def p95(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]


async def mcp_session(vault: Path, env: dict[str, str]) -> tuple[float, float, float]:
    """Seconds from spawn to initialize + tools/list, to the first search's answer, and a later search."""
    from mcp import ClientSession
    from mcp.client.stdio import StdioServerParameters, stdio_client

    params = StdioServerParameters(command=MINDNET[0], args=[*MINDNET[1:], "mcp", str(vault), "--no-e5"], env=env)
    started = time.perf_counter()
    with open(os.devnull, "w") as quiet:
        async with stdio_client(params, errlog=quiet) as (read, write), ClientSession(read, write) as session:
            await session.initialize()
            await session.list_tools()
            listed = time.perf_counter() - started
            await session.call_tool("search", {"query": QUERIES[0], "k": 5})
            first = time.perf_counter() - started
            again = time.perf_counter()
            await session.call_tool("search", {"query": QUERIES[1], "k": 5})
            return listed, first, time.perf_counter() - again


def encoder_alone(texts_file: Path) -> None:
    """`--encode TEXTS`: the project's encoder on the texts, one call per batch of the import (a process of its own)."""
    from mindnet import load_settings
    from mindnet.embedding import make_embedder

    settings = load_settings()
    batches = json.loads(texts_file.read_text(encoding="utf-8"))
    try:
        model = make_embedder(settings.model, settings.threads, settings.cache_dir)
    except TypeError:  # a checkout from before the cache folder reached the models
        model = make_embedder(settings.model, settings.threads)
    model.prepare()
    for batch in batches:
        model.embed_passages(batch)


def chunk_texts(vault: Path, out: Path) -> tuple[int, int]:
    """What the model sees of `vault` in an import, in the import's batches, written as JSON: every chunk
    (`points.embedding_input`) and every note's windows (`points.note_inputs`, issue 25), a note's chunks and
    windows in one batch, and a batch closed before the next note once it holds the import's limit
    (`sync._batch_limit`: 64 chunks the first, 256 after).

    Returns:
        (chunks, windows).
    """
    from mindnet import Vault, load_settings
    from mindnet.chunking.tokens import default_tokenizer
    from mindnet.points import embedding_input, note_inputs
    from mindnet.sync import _batch_limit

    settings = load_settings(vault)
    vault_ = Vault(vault, settings)
    tokenizer = default_tokenizer()
    by_note: dict[str, list[str]] = {}
    for chunk in vault_.chunks():
        by_note.setdefault(chunk.note_id, []).append(embedding_input(chunk, settings))
    batches: list[list[str]] = [[]]
    held = chunks = windows = 0
    for note in vault_.notes:
        texts = by_note.get(note.note_id, [])
        if held >= _batch_limit(len(batches) - 1):
            batches.append([])
            held = 0
        extra = note_inputs(note, settings, tokenizer)
        batches[-1].extend([*texts, *extra])
        held += len(texts)
        chunks, windows = chunks + len(texts), windows + len(extra)
    out.write_text(json.dumps([b for b in batches if b]), encoding="utf-8")
    return chunks, windows


Row = tuple[str, str, float, str, float]
"""(figure, command or what, value s, floor name, floor s)."""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--work", type=Path, default=Path("/tmp/mindnet-startup"))
    parser.add_argument("--runs", type=int, default=5, help="runs of each process figure (medians)")
    parser.add_argument("--edits", type=int, default=20, help="saves timed during the e5 fill")
    parser.add_argument("--only", default=",".join(FIGURES), help=f"comma list of {','.join(FIGURES)}")
    parser.add_argument("--mindnet", help="the command that runs mindnet (default: this venv's console script); "
                        "with PYTHONPATH=OLD/src and \"python -c 'from mindnet.cli import main; main()'\" it times "
                        "another checkout")
    parser.add_argument("--encode", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.mindnet:
        import shlex

        MINDNET[:] = shlex.split(args.mindnet)
    if args.encode is not None:
        encoder_alone(args.encode)
        return
    only = set(args.only.split(","))
    work = args.work.resolve()
    work.mkdir(parents=True, exist_ok=True)
    env = child_env(work)
    vault = build_vault(work / "vault")
    rows: list[Row] = []
    say = lambda text: print(text, file=sys.stderr, flush=True)  # noqa: E731
    say(f"vault {vault}: {sum(1 for _ in vault.rglob('*.md'))} notes; load {os.getloadavg()[0]:.1f}")
    timed([*MINDNET, "import", str(vault), "--no-quality-tier"], env)  # builds the USE graph into the cache
    timed([*MINDNET, "search", QUERIES[0], "--vault", str(vault)], env)  # writes mindnet's bytecode cache

    def cold(i: int) -> float:
        return timed([*MINDNET, "search", QUERIES[i % len(QUERIES)], "--vault", str(vault)], env)

    if "cold" in only:
        value, floor = paired(cold, lambda: floor_numpy(env), args.runs)
        rows.append(("cold search, e5 not filled", "mindnet search Q --vault V", value, "import numpy, onnxruntime",
                     floor))
    if "fill" in only:
        # The e5 graph is built once per machine (seconds); this figure is about every later fill.
        timed([PYTHON, "-c", "from mindnet import load_settings; from mindnet.embedding import make_embedder\n"
               "try:\n    make_embedder('e5', 0, load_settings().cache_dir).prepare()\n"
               "except TypeError:\n    pass  # a checkout without the cache folder: every process builds it"], env)
        server = Serve(vault, env)  # fills the e5 tier in the background from the first moment
        try:
            during, filling = save_to_searchable(server, vault, args.edits, "f", during_fill=True)
        finally:
            server.stop()
        say(f"save -> searchable: {filling} of {len(during)} saves while the e5 fill ran")
        rows.append(("save -> searchable p50, e5 filling", f"{filling} of {len(during)} saves during the fill",
                     statistics.median(during), "", float("nan")))
        rows.append(("save -> searchable p95, e5 filling", "", p95(during), "", float("nan")))
    timed([*MINDNET, "embed", "--vault", str(vault)], env)  # the tier complete (and its graph cached)
    if "cold" in only:
        value, floor = paired(cold, lambda: floor_numpy(env), args.runs)
        rows.append(("cold search, e5 filled", "mindnet search Q --vault V", value, "import numpy, onnxruntime",
                     floor))
        # A one-off search fuses e5 only when the vault's settings ask for the tier: what that costs.
        tier_env = env | {"MINDNET_QUALITY_TIER": "true"}
        value, floor = paired(lambda i: timed([*MINDNET, "search", QUERIES[i % len(QUERIES)], "--vault", str(vault)],
                                              tier_env), lambda: floor_numpy(env), args.runs)
        rows.append(("cold search, e5 filled, quality_tier = true", "the same, fusing the e5 list", value,
                     "import numpy, onnxruntime", floor))
    if "noop" in only:
        value, floor = paired(lambda i: timed([*MINDNET, "import", str(vault)], env), lambda: floor_numpy(env),
                              args.runs)
        rows.append(("no-op re-import", "mindnet import V", value, "import numpy, onnxruntime", floor))
    if "serve" in only or "fill" in only:
        server = Serve(vault, env)
        try:
            first = search_seconds(server, QUERIES[2])
            later = statistics.median(search_seconds(server, q) for q in QUERIES * 2)
            if "serve" in only:
                rows.append(("serve: spawn -> ready", "mindnet serve V (health ok)", server.ready_after, "",
                             float("nan")))
                rows.append(("serve: first API search after ready", "/api/search", first, "later searches", later))
                value, floor = paired(cold, lambda: floor_python(env), 2 * args.runs)
                rows.append(("mindnet search via serve", "mindnet search Q --vault V", value, "python -c pass", floor))
            if "fill" in only:
                idle, _ = save_to_searchable(server, vault, max(5, args.edits // 4), "i", during_fill=False)
                rows.append(("save -> searchable p95, e5 complete", "(the floor of the fill figure)", p95(idle), "",
                             float("nan")))
        finally:
            server.stop()
    if "mcp" in only:
        sessions = [asyncio.run(mcp_session(vault, env)) for _ in range(max(1, args.runs // 2))]
        later = statistics.median(s[2] for s in sessions)
        rows.append(("MCP initialize + tools/list", "from spawn, official SDK client",
                     statistics.median(s[0] for s in sessions), "a later search", later))
        rows.append(("MCP first search", "from spawn", statistics.median(s[1] for s in sessions), "a later search",
                     later))
    if "import" in only:
        german = work / "german"
        shutil.rmtree(german, ignore_errors=True)
        shutil.copytree(CORPORA / "rustbook-de" / "src", german)
        texts = work / "german-texts.json"
        chunks, windows = chunk_texts(german, texts)
        imports, encoders, overlap = [], [], []
        for _ in range(max(1, args.runs // 2)):
            shutil.rmtree(german / ".mindnet", ignore_errors=True)  # store, embedding and notes caches
            encoders.append(timed([PYTHON, __file__, "--encode", str(texts)], env))
            summary = german / "summary.json"
            imports.append(timed([*MINDNET, "import", str(german), "--no-quality-tier", "--json"], env, out=summary))
            result = json.loads(summary.read_text(encoding="utf-8"))
            overlap.append(f"{result['encoder_ahead']}/{result['encoder_threads']}")
        rows.append((f"cold import ({chunks} chunks, {windows} note windows, rustbook-de)",
                     f"mindnet import G, empty store and caches (batches ahead/threads: {', '.join(overlap)})",
                     statistics.median(imports), "encoder alone, chunks and windows", statistics.median(encoders)))
    print(report(rows, args.runs))


def report(rows: list[Row], runs: int) -> str:
    load = os.getloadavg()
    out = [f"# bench/startup.py: medians of {runs} runs, {os.cpu_count()} cores, load {load[0]:.1f} / {load[1]:.1f}",
           "", "| figure | what | value | floor | floor value | ratio |", "| --- | --- | --- | --- | --- | --- |"]
    for figure, what, value, floor_name, floor in rows:
        ratio = f"{value / floor:.2f}x" if floor == floor and floor > 0 else ""
        floor_text = f"{floor:.3f} s" if floor == floor else ""
        out.append(f"| {figure} | {what} | {value:.3f} s | {floor_name} | {floor_text} | {ratio} |")
    return "\n".join(out)


if __name__ == "__main__":
    main()
