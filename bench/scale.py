"""Large vaults (issue 27): import and `serve` memory, no-op re-import and search latency at 1k-30k notes.

Vaults of each size are built from copies of `../shared/corpora/msdocs-skype-teams-de` (2,905 notes), one
copy per folder (`copy-00/`, `copy-01/`, …), the first N files by path. Every copy after the first gets a
frontmatter key of its own (`kopie: N`) in each note, so no two files have the same text (file hashes), and
ids are unique by path. Chunk texts stay those of the corpus, so the model's vectors come from the embedding cache
(`--cache-from`, an `embeddings.sqlite` of an msdocs import; `CachedEmbedder`): the import figures at every
size are "cached" ones, and one uncached import of a `--uncached` slice (empty cache) says what the model
adds. Every figure comes from the same run; the bench prints the command that reproduces it.

    .venv/bin/python bench/scale.py --sizes 1000 10000 30000 \\
        --cache-from /work/scale-work/store-msdocs/embeddings.sqlite --work /work/scale-work/bench

Per size: `mindnet import --json` as a process (wall time, peak RSS from wait4), the same command again
(no-op), then `mindnet serve --no-e5` on the store: RSS once warmed up (and its parts: anonymous memory,
mapped files' pages), search p50/p95 over HTTP
(`/api/search`, lexical+dense), RSS after `--edits` edits (appended lines, `--rounds` rounds each waited
for), and once more after a round of searches that follows them (the store pages the searches map are part
of what a server holds while it is used). With more than 100 edits the server is also measured at rest every
100 (`--edits 400 --rounds 40`: four figures, ten notes a save as with the defaults), to show whether what it
holds levels off. Last, after every memory figure, `--saves` single saves, each timed from the write until a
lexical search finds its new word (save -> searchable, p50/p95). The models' own RSS is that of `serve` on a
10-note vault after the same warm-up.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import MSDOCS, seconds_to_searchable, table
from serve import Served
from serve import p as pct

DOCS = MSDOCS / "docs"
"""The 2,905 notes of the corpus (its SOURCE.md left out), as the issue measured them."""
MINDNET = str(Path(sys.executable).with_name("mindnet"))
IDLE_NOTE = "IDLE_RELEASE_SECONDS + 1.5 s after the last search"
CHECKPOINT_EDITS = 100
"""With `--edits` above this, the server is also measured at rest (after a round of searches) every this many edits:
whether what it holds levels off or keeps growing with the saves."""
QUERIES = ("Besprechung planen", "Anrufweiterleitung einrichten", "Teams Räume Geräte", "Richtlinien für Chats",
           "Skype for Business Migration", "Gastzugriff aktivieren", "Telefonnummern zuweisen", "Livestream",
           "Wie konfiguriere ich Direct Routing?", "Aufbewahrungsrichtlinien für Teams")


def build_vault(work: Path, notes: int) -> Path:
    """`notes` files from copies of msdocs, each copy in its own folder; copies after the first edited."""
    vault = work / f"vault-{notes}"
    if vault.is_dir() and not edited(vault).exists():
        return vault
    shutil.rmtree(vault, ignore_errors=True)  # a run's edits are in it: its texts are no longer all cached
    source = sorted(p.relative_to(DOCS).as_posix() for p in DOCS.rglob("*.md"))
    tmp = work / f".building-{notes}"
    shutil.rmtree(tmp, ignore_errors=True)
    for i in range(notes):
        copy, at = divmod(i, len(source))
        rel = source[at]
        target = tmp / f"copy-{copy:02d}" / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        text = (DOCS / rel).read_text(encoding="utf-8")
        if copy:  # another file hash, the same chunk texts (their vectors are in the cache)
            text = (f"---\nkopie: {copy}\n{text[4:]}" if text.startswith("---\n")
                    else f"---\nkopie: {copy}\n---\n{text}")
        target.write_text(text, encoding="utf-8")
    tmp.rename(vault)
    return vault


def edited(vault: Path) -> Path:
    """The mark beside a vault that `served` edited: the next run builds it again."""
    return vault.with_name(f"{vault.name}.edited")


def timed(cmd: list[str]) -> tuple[float, float, str]:
    """Wall seconds, peak RSS (MB) and stdout of one process."""
    started = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    out = proc.stdout.read() if proc.stdout else ""
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode:
        raise SystemExit(f"{shlex.join(cmd)} exited with {proc.returncode}")
    return time.perf_counter() - started, usage.ru_maxrss / 1024, out


def fresh_store(store: Path, cache: Path | None) -> None:
    shutil.rmtree(store, ignore_errors=True)
    store.mkdir(parents=True)
    if cache is not None:
        shutil.copy2(cache, store / "embeddings.sqlite")


def searches(server: Served, rounds: int) -> list[float]:
    """Seconds per `/api/search` request, `rounds` times over the queries."""
    out: list[float] = []
    for r in range(rounds):
        for q in QUERIES:
            started = time.perf_counter()
            server.get("/api/search", q=q if not r else f"{q} {r}", k=10)
            out.append(time.perf_counter() - started)
    return out


def at_rest(server: Served, key: str) -> dict[str, float]:
    """RSS and its parts once the server has been idle long enough to let go of the store's pages
    (`service.IDLE_RELEASE_SECONDS`, and a second more): what a server holds between uses."""
    from mindnet.service import IDLE_RELEASE_SECONDS

    time.sleep(IDLE_RELEASE_SECONDS + 1.5)
    parts = server.rss_parts_mb()
    return {f"{key}_mb": parts["VmRSS"], f"{key}_anon_mb": parts.get("RssAnon", float("nan")),
            f"{key}_file_mb": parts.get("RssFile", float("nan"))}


def served(vault: Path, store: Path, log: Path, edits: int, rounds: int, saves: int = 0) -> dict[str, Any]:
    """Serve RSS once warmed up, search latency, and RSS after `edits` edits in `rounds` waited-for rounds; then,
    after every memory figure, `saves` single saves timed until their new word is found (save -> searchable)."""
    server = Served(vault, log, store=store, command=[MINDNET], timeout=600)
    try:
        server.ready()
        server.wait_idle(1)
        server.warmed()
        searches(server, 1)  # every code path of a search has run once
        parts = server.rss_parts_mb()
        out = {"rss_warm_mb": parts["VmRSS"], "rss_anon_warm_mb": parts.get("RssAnon", float("nan")),
               "rss_file_warm_mb": parts.get("RssFile", float("nan"))}
        took = searches(server, 5)
        out |= {"search_p50_ms": pct(took, 0.5) * 1000, "search_p95_ms": pct(took, 0.95) * 1000}
        out |= at_rest(server, "rss_rest")
        if edits:
            edited(vault).touch()
            notes = sorted(p for p in vault.rglob("*.md") if ".mindnet" not in p.parts)
            per_round = max(1, edits // max(1, rounds))
            done = 0
            rss: list[float] = []
            by_hundred: list[float] = []
            while done < edits:
                before = server.imports()
                for i in range(done, min(edits, done + per_round)):
                    with notes[(i * 7919) % len(notes)].open("a", encoding="utf-8") as fh:
                        fh.write(f"\n\nÄnderung {i} für den Benchmark.\n")
                done = min(edits, done + per_round)
                time.sleep(0.5)
                server.wait_idle(before + 1)
                rss.append(server.rss_mb())
                if done % CHECKPOINT_EDITS == 0 and done < edits:  # the last one is the figure below
                    searches(server, 1)
                    by_hundred.append(at_rest(server, "r")["r_mb"])
            out |= {"rss_edits_mb": rss[-1], "rss_edits_min_mb": min(rss), "rss_edits_max_mb": max(rss)}
            searches(server, 1)  # what a user who searches between saves sees
            out["rss_edits_searched_mb"] = server.rss_mb()
            out |= at_rest(server, "rss_edits_rest")
            out["rss_rest_by_edits_mb"] = [*by_hundred, out["rss_edits_rest_mb"]]
        if saves:
            notes = sorted(p for p in vault.rglob("*.md") if ".mindnet" not in p.parts)
            edited(vault).touch()
            run = f"{int(time.time()):x}"
            took = [seconds_to_searchable(server.get, notes[(i * 6151 + 17) % len(notes)], f"zqx{run}{i:04d}skala")
                    for i in range(saves)]
            out |= {"save_p50_s": pct(took, 0.5), "save_p95_s": pct(took, 0.95)}
        return out
    finally:
        server.stop()


def one_size(args: argparse.Namespace, notes: int) -> dict[str, Any]:
    vault = build_vault(args.work, notes)
    store = args.work / f"store-{notes}"
    fresh_store(store, args.cache_from)
    cmd = [MINDNET, "import", str(vault), "--store", str(store), "--json"]
    seconds, peak, out = timed(cmd)
    summary = json.loads(out)
    row: dict[str, Any] = {"notes": notes, "chunks": summary["chunks_written"], "embedded": summary["chunks_embedded"],
                           "import_s": seconds, "import_peak_mb": peak}
    row["noop_s"], row["noop_peak_mb"], _ = timed(cmd)
    row |= served(vault, store, args.work / f"serve-{notes}.log", args.edits, args.rounds, args.saves)
    print(json.dumps(row), flush=True)
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", type=int, nargs="+", default=[1000, 10000, 30000])
    parser.add_argument("--cache-from", type=Path, default=None,
                        help="an embeddings.sqlite holding the corpus' vectors (none: every size embeds)")
    parser.add_argument("--uncached", type=int, default=1000,
                        help="notes of the slice imported with no cache (0: skip)")
    parser.add_argument("--edits", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=10, help="edits are made in this many rounds, each imported")
    parser.add_argument("--saves", type=int, default=20,
                        help="single saves timed from the write to the first search hit (save -> searchable)")
    parser.add_argument("--work", type=Path, default=Path("/tmp/mindnet-bench-scale"))
    args = parser.parse_args()
    if not MSDOCS.is_dir():
        raise SystemExit(f"corpus not found: {MSDOCS}")
    args.work.mkdir(parents=True, exist_ok=True)
    print("command:", shlex.join([sys.executable, *sys.argv]), flush=True)
    print("started:", time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), f"load {os.getloadavg()[0]:.1f}", flush=True)
    base = build_vault(args.work, 10)
    fresh_store(args.work / "store-10", args.cache_from)
    timed([MINDNET, "import", str(base), "--store", str(args.work / "store-10"), "--json"])
    own = served(base, args.work / "store-10", args.work / "serve-10.log", 0, 0)
    models = own["rss_warm_mb"]
    print(f"models: serve RSS on 10 notes after warm-up {models:.0f} MB (anon {own['rss_anon_warm_mb']:.0f}, "
          f"file {own['rss_file_warm_mb']:.0f})", flush=True)
    uncached: dict[str, Any] | None = None
    if args.uncached:
        vault = build_vault(args.work, args.uncached)
        store = args.work / f"store-uncached-{args.uncached}"
        fresh_store(store, None)
        seconds, peak, out = timed([MINDNET, "import", str(vault), "--store", str(store), "--json"])
        uncached = {"notes": args.uncached, "import_s": seconds, "import_peak_mb": peak,
                    "embedded": json.loads(out)["chunks_embedded"]}
        print(json.dumps({"uncached": uncached}), flush=True)
    rows = [one_size(args, n) for n in args.sizes]
    print()
    print(table(["notes", "chunks", "import s", "notes/s", "import peak MB", "no-op s", "serve MB warm",
                 "of it anon / file MB", f"serve MB +{args.edits} edits", "min..max MB", "search p50 ms", "p95 ms"],
                [(r["notes"], r["chunks"], r["import_s"], r["notes"] / r["import_s"], r["import_peak_mb"], r["noop_s"],
                  r["rss_warm_mb"], f"{r['rss_anon_warm_mb']:.0f} / {r['rss_file_warm_mb']:.0f}", r.get("rss_edits_mb"),
                  f"{r.get('rss_edits_min_mb', 0):.0f}..{r.get('rss_edits_max_mb', 0):.0f}",
                  r["search_p50_ms"], r["search_p95_ms"]) for r in rows]))
    if uncached is not None:
        cached = next((r for r in rows if r["notes"] == uncached["notes"]), None)
        line = (f"uncached import of {uncached['notes']} notes: {uncached['import_s']:.1f} s, "
                f"peak {uncached['import_peak_mb']:.0f} MB, {uncached['embedded']} chunks embedded")
        if cached:
            line += f"; cached: {cached['import_s']:.1f} s ({uncached['import_s'] / cached['import_s']:.1f}x faster)"
        print(line)
    small, large = rows[0], rows[-1]
    per_note_kb = (large["rss_warm_mb"] - models) * 1024 / large["notes"]
    anon_kb = (large["rss_anon_warm_mb"] - own["rss_anon_warm_mb"]) * 1024 / large["notes"]
    print(f"models' own serve RSS {models:.0f} MB; at {large['notes']} notes serve holds "
          f"{per_note_kb:.1f} KB/note more ({anon_kb:.1f} KB/note of it anonymous memory, the rest mapped files)")
    print(f"growth {small['notes']} -> {large['notes']} notes: "
          f"import peak x{large['import_peak_mb'] / small['import_peak_mb']:.2f}, "
          f"serve RSS x{large['rss_warm_mb'] / small['rss_warm_mb']:.2f}, "
          f"search p50 x{large['search_p50_ms'] / small['search_p50_ms']:.2f}, "
          f"import s/note x{(large['import_s'] / large['notes']) / (small['import_s'] / small['notes']):.2f}")
    rest = own["rss_rest_mb"]
    print(f"at rest (idle {IDLE_NOTE}): models' own {rest:.0f} MB; "
          + "; ".join(f"{r['notes']} notes {r['rss_rest_mb']:.0f} MB (anon {r['rss_rest_anon_mb']:.0f} / file "
                      f"{r['rss_rest_file_mb']:.0f}), {(r['rss_rest_mb'] - rest) * 1024 / r['notes']:.1f} KB/note more"
                      for r in rows))
    if "rss_edits_rest_mb" in large:
        print(f"  at rest after the {args.edits} edits and a round of searches: {large['rss_edits_rest_mb']:.0f} MB "
              f"({(large['rss_edits_rest_mb'] - large['rss_rest_mb']) / large['rss_rest_mb'] * 100:+.1f} % of at rest "
              "before them)")
        if len(large.get("rss_rest_by_edits_mb", ())) > 1:
            print(f"  at rest every {CHECKPOINT_EDITS} edits: {large['rss_rest_mb']:.0f} -> "
                  + " -> ".join(f"{m:.0f}" for m in large["rss_rest_by_edits_mb"]) + " MB ("
                  + ", ".join(f"{(m - large['rss_rest_mb']) / large['rss_rest_mb'] * 100:+.1f} %"
                              for m in large["rss_rest_by_edits_mb"]) + ")")
    if "save_p50_s" in large:
        print("save -> searchable (one note saved, until search finds its new word), p50 / p95: "
              + "; ".join(f"{r['notes']} notes {r['save_p50_s']:.3f} / {r['save_p95_s']:.3f} s" for r in rows))
    if "rss_edits_mb" in large:
        warm = large["rss_warm_mb"]
        drift = (large["rss_edits_max_mb"] - large["rss_edits_min_mb"]) / warm * 100
        low, high = ((large[k] - warm) / warm * 100 for k in ("rss_edits_min_mb", "rss_edits_max_mb"))
        print(f"serve RSS over {args.edits} edits at {large['notes']}: {warm:.0f} MB warm, "
              f"{large['rss_edits_min_mb']:.0f}..{large['rss_edits_max_mb']:.0f} MB after each round "
              f"({low:+.1f}..{high:+.1f} % of warm; spread over the rounds {drift:.1f} % of warm)")
        if "rss_edits_searched_mb" in large:
            after = large["rss_edits_searched_mb"]
            print(f"  and after a round of searches following the edits: {after:.0f} MB "
                  f"({(after - warm) / warm * 100:+.1f} % of warm)")
    print("finished:", time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), f"load {os.getloadavg()[0]:.1f}")
    (args.work / "scale.json").write_text(json.dumps({"models_mb": models, "models": own, "uncached": uncached,
                                                      "rows": rows},
                                                     indent=2))


if __name__ == "__main__":
    main()
