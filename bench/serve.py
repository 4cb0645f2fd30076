"""`mindnet serve` under use: save → searchable, queries during a burst import, memory over many edits,
and a CLI search through the server against one without it — all measured in one run.

A slice of `../shared/corpora/msdocs-skype-teams-de` (the first N notes by path) is copied to a work
folder and served by a real `mindnet serve` process with the real model (e5 off, so the numbers are
the default tier's). Every figure comes from the same run, so the ratios hold on a noisy machine.

    .venv/bin/python bench/serve.py [--notes 1000] [--edits 50] [--rss-edits 1000] [--clients 8]
                                    [--burst 500] [--cli-runs 10] [--work /tmp/mindnet-bench-serve] [--json]

- save → searchable: append a sentence with a fresh word to a note, then poll a lexical search for
  that word every 10 ms; the time from the write to the first hit (the watcher's quiet step, the
  incremental import with the encoder for the edited chunk, and the search) — p50/p95.
- queries during a burst: `--clients` threads search as fast as they can while `--burst` files are
  touched at once; queries per second, latency p50/p95, and failed requests (the goal: none).
- memory: the server's RSS after the first edit and after `--rss-edits` edits (VmRSS from /proc).
- CLI: `mindnet search --json` as a whole process, `--cli-runs` times with the server running, then
  as many without it (the store opened by the process itself).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import threading
import time
import urllib.parse
import urllib.request
from collections.abc import Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import MSDOCS, dump_json, seconds_to_searchable, server_url, table

CLI = [sys.executable, "-c", "from mindnet.cli import main; main()"]
RUN = f"{int(time.time()):x}"
QUERIES = ("Besprechung planen", "Anrufweiterleitung einrichten", "Teams Räume Geräte", "Richtlinien für Chats",
           "Skype for Business Migration", "Gastzugriff aktivieren", "Telefonnummern zuweisen", "Livestream")


def p(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))] if ordered else float("nan")


class Served:
    """A `mindnet serve --no-e5` process and plain HTTP to it (also `bench/scale.py`'s and `bench/web.py`'s)."""

    def __init__(self, vault: Path, log: Path, *, store: Path | None = None, command: Sequence[str] = CLI,
                 timeout: float = 120) -> None:
        self.vault = vault
        self.timeout = timeout
        """Seconds a request may take (a 30k-note store answers its first ones slowly)."""
        self._log = log.open("w")
        extra = ["--store", str(store)] if store is not None else []
        self.proc = subprocess.Popen([*command, "serve", str(vault), *extra, "--port", "0", "--no-e5"],
                                     stdout=self._log, stderr=subprocess.STDOUT)
        self.url = server_url(self.proc, (store or vault / ".mindnet") / "server.json", 0.1)

    def get(self, path: str, **params: Any) -> Any:
        url = f"{self.url}{path}?{urllib.parse.urlencode(params, doseq=True)}"
        with urllib.request.urlopen(url, timeout=self.timeout) as response:
            return json.loads(response.read())

    def ready(self) -> None:
        """Until `/api/health` says ok (the server is warm)."""
        while self.get("/api/health").get("status") != "ok":
            time.sleep(0.2)

    def warmed(self) -> None:
        """Until the server's whole warm-up is over (its status says `warmed`): what it loads after ready too."""
        while not self.get("/api/status")["resident"].get("warmed", True):
            time.sleep(0.2)

    def imports(self) -> int:
        """Imports the server has finished."""
        return int(self.get("/api/status")["resident"]["imports"])

    def rss_mb(self) -> float:
        return self.rss_parts_mb().get("VmRSS", float("nan"))

    def rss_parts_mb(self) -> dict[str, float]:
        """VmRSS and its parts (MB): RssAnon (the process's own memory), RssFile (mapped files' pages it
        has touched: the store's and the models', which the kernel can drop) and RssShmem."""
        parts = {}
        for line in Path(f"/proc/{self.proc.pid}/status").read_text().splitlines():
            key, _, value = line.partition(":")
            if key in ("VmRSS", "RssAnon", "RssFile", "RssShmem"):
                parts[key] = int(value.split()[0]) / 1024
        return parts

    def wait_idle(self, imports: int) -> None:
        """Until the server finished at least `imports` imports and runs none."""
        while True:
            state = self.get("/api/status")["resident"]
            if state["imports"] >= imports and not state["importing"]:
                return
            time.sleep(0.2)

    def stop(self) -> None:
        self.proc.send_signal(signal.SIGTERM)
        self.proc.wait(timeout=300)
        self._log.close()


def make_vault(work: Path, notes: int) -> Path:
    vault = work / f"vault-{notes}"
    if not vault.exists():
        chosen = sorted(p.relative_to(MSDOCS).as_posix() for p in MSDOCS.rglob("*.md"))[:notes]
        for rel in chosen:
            (vault / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(MSDOCS / rel, vault / rel)
    return vault


def notes_of(vault: Path) -> list[Path]:
    return sorted(p for p in vault.rglob("*.md") if ".mindnet" not in p.parts)


def save_to_searchable(server: Served, notes: list[Path], edits: int, offset: int) -> list[float]:
    """Seconds from each write to the first search hit for its fresh word."""
    seconds: list[float] = []
    for i in range(edits):
        note = notes[(i * 37 + offset) % len(notes)]
        word = f"zqx{RUN}{offset + i:05d}benchmark"  # new in every run: a reused work folder holds old words
        seconds.append(seconds_to_searchable(server.get, note, word))
    return seconds


def burst_queries(server: Served, notes: list[Path], clients: int, burst: int) -> dict[str, Any]:
    """Queries from `clients` threads while `burst` files change at once; until the burst is imported."""
    latencies: list[float] = []
    failures: list[str] = []
    done = threading.Event()
    lock = threading.Lock()

    def client(n: int) -> None:
        k = n
        while not done.is_set():
            query = QUERIES[k % len(QUERIES)]
            k += 1
            started = time.perf_counter()
            try:
                server.get("/api/search", q=query, k=10)
            except Exception as exc:  # every failure counts, whatever it is
                with lock:
                    failures.append(repr(exc))
                continue
            with lock:
                latencies.append(time.perf_counter() - started)

    imports_before = server.get("/api/status")["resident"]["imports"]
    threads = [threading.Thread(target=client, args=(n,)) for n in range(clients)]
    started = time.perf_counter()
    for t in threads:
        t.start()
    time.sleep(2.0)  # a steady state before the burst
    for note in notes[:burst]:
        with note.open("a", encoding="utf-8") as fh:
            fh.write("\n\nEin Satz, der bei einem git checkout hinzukam.\n")
    server.wait_idle(imports_before + 1)
    time.sleep(1.0)
    done.set()
    for t in threads:
        t.join()
    elapsed = time.perf_counter() - started
    imports = server.get("/api/status")["resident"]["imports"] - imports_before
    return {"queries": len(latencies), "qps": len(latencies) / elapsed, "p50_ms": 1000 * p(latencies, 0.5),
            "p95_ms": 1000 * p(latencies, 0.95), "failed": len(failures), "imports_for_burst": imports,
            "seconds": elapsed, "failures": failures[:5]}


def cli_search(vault: Path, runs: int) -> list[float]:
    seconds = []
    for i in range(runs):
        started = time.perf_counter()
        subprocess.run([*CLI, "search", QUERIES[i % len(QUERIES)], "--vault", str(vault), "--json", "--k", "5"],
                       check=True, capture_output=True)
        seconds.append(time.perf_counter() - started)
    return seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--notes", type=int, default=1000)
    parser.add_argument("--edits", type=int, default=50)
    parser.add_argument("--rss-edits", type=int, default=1000)
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--burst", type=int, default=500)
    parser.add_argument("--cli-runs", type=int, default=10)
    parser.add_argument("--work", type=Path, default=Path("/tmp/mindnet-bench-serve"))
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    if not MSDOCS.is_dir():
        raise SystemExit(f"corpus not found: {MSDOCS}")
    args.work.mkdir(parents=True, exist_ok=True)
    vault = make_vault(args.work, args.notes)
    notes = notes_of(vault)
    began = time.perf_counter()
    server = Served(vault, args.work / "serve.log")
    results: dict[str, Any] = {"notes": len(notes)}
    try:
        server.wait_idle(1)
        results["first_import_s"] = time.perf_counter() - began
        status = server.get("/api/status")
        results["chunks"] = status["chunks"]
        edits = save_to_searchable(server, notes, args.edits, 0)
        results["save_to_searchable"] = {"edits": len(edits), "p50_s": p(edits, 0.5), "p95_s": p(edits, 0.95)}
        results["rss_first_mb"] = server.rss_mb()
        if args.rss_edits > args.edits:
            save_to_searchable(server, notes, args.rss_edits - args.edits, args.edits)
        results["rss_after_mb"] = server.rss_mb()
        results["rss_edits"] = max(args.rss_edits, args.edits)
        results["burst"] = burst_queries(server, notes, args.clients, min(args.burst, len(notes)))
        through = cli_search(vault, args.cli_runs)
    finally:
        server.stop()
    alone = cli_search(vault, args.cli_runs)
    results["cli_search"] = {"through_server_p50_s": statistics.median(through),
                             "without_server_p50_s": statistics.median(alone),
                             "ratio": statistics.median(alone) / statistics.median(through)}
    results["load_average"] = os.getloadavg()
    if args.json:
        dump_json(results)
        return
    b, c, s = results["burst"], results["cli_search"], results["save_to_searchable"]
    print(f"{results['notes']} notes, {results['chunks']} chunks; first import {results['first_import_s']:.1f} s; "
          f"load average {results['load_average'][0]:.1f}")
    print(table(["measure", "value"], [
        ("save → searchable p50 (s)", s["p50_s"]), ("save → searchable p95 (s)", s["p95_s"]),
        (f"queries/s, {args.clients} clients during a {args.burst}-file burst", b["qps"]),
        ("  query p50 (ms)", b["p50_ms"]), ("  query p95 (ms)", b["p95_ms"]), ("  failed requests", b["failed"]),
        ("  imports the burst took", b["imports_for_burst"]),
        ("RSS after the first edit (MB)", results["rss_first_mb"]),
        (f"RSS after {results['rss_edits']} edits (MB)", results["rss_after_mb"]),
        ("CLI search through the server p50 (s)", c["through_server_p50_s"]),
        ("CLI search without a server p50 (s)", c["without_server_p50_s"]),
        ("  without / through", c["ratio"]),
    ]))


if __name__ == "__main__":
    main()
