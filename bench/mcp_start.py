"""Time from spawning `mindnet mcp` to its first tool list, through the MCP SDK's own client.

The issue asks for the tool list within 1 s of starting the process. Measured for both paths:
`local` (this process opens the store for the instructions, the model loads only after the
tool list) and `remote` (a `mindnet serve` runs for the store and answers). Each round spawns a
fresh process; the CPU seconds of the server process are printed beside the wall time, since
on a shared, loaded box the wall time mostly measures the other tenants.

    .venv/bin/python bench/mcp_start.py                # 5 rounds, local and remote
    .venv/bin/python bench/mcp_start.py --rounds 10 --paths local
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from mcp import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

CLI = [sys.executable, "-c", "from mindnet.cli import main; main()"]
NOTES = {
    "alpha.md": "---\ntitle: Alpha\ntags: [search]\n---\n# Alpha\n\nAlpha links to [[beta]] about rank fusion.\n",
    "beta.md": "---\ntitle: Beta\n---\n# Beta\n\nBeta explains chunk overlap.\n",
    "gamma.md": "---\ntitle: Gamma\n---\n# Gamma\n\nGamma handelt von Tomaten im Garten.\n",
}


async def first_list(vault: Path) -> float:
    params = StdioServerParameters(command=CLI[0], args=[*CLI[1:], "mcp", str(vault), "--no-e5"])
    started = time.perf_counter()
    with open(os.devnull, "w") as quiet:
        async with stdio_client(params, errlog=quiet) as (read, write), ClientSession(read, write) as session:
            await session.initialize()
            await session.list_tools()
            return time.perf_counter() - started


def children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def measure(vault: Path, rounds: int) -> tuple[list[float], list[float]]:
    walls, cpus = [], []
    for _ in range(rounds):
        before = children_cpu()
        walls.append(asyncio.run(first_list(vault)))
        time.sleep(0.5)  # the child is reaped when the client closes; its CPU then counts
        cpus.append(children_cpu() - before)
    return walls, cpus


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--paths", nargs="+", choices=("local", "remote"), default=["local", "remote"])
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        vault = Path(tmp) / "vault"
        vault.mkdir()
        for name, text in NOTES.items():
            (vault / name).write_text(text, encoding="utf-8")
        subprocess.run([*CLI, "import", str(vault), "--no-quality-tier"], check=True, capture_output=True)
        rows = {}
        if "local" in args.paths:
            rows["local"] = measure(vault, args.rounds)
        if "remote" in args.paths:
            serve = subprocess.Popen([*CLI, "serve", str(vault), "--port", "0", "--no-e5", "--no-watch"],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            try:
                address = vault / ".mindnet" / "server.json"
                while not (address.exists() and json.loads(address.read_text()).get("pid") == serve.pid):
                    time.sleep(0.1)
                rows["remote"] = measure(vault, args.rounds)
            finally:
                serve.terminate()
                serve.wait(60)
    load = os.getloadavg()[0]
    print(f"first tool list after spawn, {args.rounds} rounds (load average {load:.1f} on {os.cpu_count()} cores)")
    print(f"{'path':8s} {'wall p50':>9s} {'wall min':>9s} {'cpu p50':>8s}  (cpu: whole server process)")
    for name, (walls, cpus) in rows.items():
        print(f"{name:8s} {statistics.median(walls):8.3f}s {min(walls):8.3f}s {statistics.median(cpus):7.3f}s")


if __name__ == "__main__":
    main()
