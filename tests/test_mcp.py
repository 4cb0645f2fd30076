"""`mindnet mcp` as a real process, driven by the MCP SDK's own client, with the real model (issue 17).

One stdio session runs for the module on a tiny imported vault: the fixture makes every call once
and records what came back; each test then checks one promise (cited hits, strict arguments,
close names on a miss, nothing outside the vault). A second process checks that stdout carries
nothing but protocol, and one `mindnet serve` answers the same tools over Streamable HTTP at `/mcp`.
"""

from __future__ import annotations

import asyncio
import dataclasses
import itertools
import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx2
import pytest
from hypothesis import given
from hypothesis import strategies as st
from mcp import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client

from mindnet import Hit, snippet
from mindnet.api import section_paths
from mindnet.search import fuse_hits
from test_serve import Server, wait_for

CLI = [sys.executable, "-c", "from mindnet.cli import main; main()"]
TOOLS = {"search", "read", "related", "context", "status"}

NOTES = {
    "concepts/rrf.md": (
        "---\ntitle: Reciprocal Rank Fusion\ntype: concept\ntags: [search, ranking]\ncreated: 2024-03-01\n---\n"
        "# Reciprocal Rank Fusion\n\nRRF merges ranked lists by summing one over k plus rank. See [[overlap]].\n\n"
        "## Formula\n\nEvery list adds one over sixty plus the rank of a document.\n\n"
        "## History\n\nCormack and Clarke proposed it in 2009. See also [[bm25 tuning]].\n"
    ),
    "concepts/overlap.md": (
        "---\ntitle: Overlap\ntype: concept\ntags: [chunking]\ncreated: 2023-05-01\n---\n"
        "# Overlap\n\nChunk overlap carries context from one chunk into the next one.\n"
    ),
    "garden/tomaten.md": (
        "---\ntitle: Tomaten\ntype: note\ntags: [garten]\ncreated: 2024-06-10\n---\n"
        "# Tomaten\n\nDie Tomaten wachsen im Garten in der Sonne und brauchen viel Wasser im Sommer.\n"
    ),
    "daily/2024-06-11.md": "# 2024-06-11\n\nWatered the [[tomaten]] and read about [[reciprocal rank fusion]].\n",
}
SECRET = "the secret outside the vault"


def write_vault(root: Path) -> Path:
    for name, text in NOTES.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text, encoding="utf-8")
    (root.parent / "secret.md").write_text(f"# Secret\n\n{SECRET}\n", encoding="utf-8")
    return root


CALLS: dict[str, tuple[str, dict[str, Any]]] = {
    "search": ("search", {"query": "how are ranked lists merged", "k": 3}),
    "fused": ("search", {"query": ["ranked lists merged", "Tomaten im Garten"], "k": 6, "by_note": True,
                         "group": "chunk"}),
    "grouped": ("search", {"query": ["ranked lists merged", "Tomaten im Garten"], "k": 4}),
    "explained": ("search", {"query": "how are ranked lists merged", "k": 3, "group": "chunk", "explain": True}),
    "by_type": ("search", {"query": "chunk context", "type": ["concept"], "k": 5}),
    "by_lang": ("search", {"query": "Garten Sonne Wasser", "language": "de", "k": 5}),
    "by_path": ("search", {"query": "lists", "path_prefix": "concepts/", "mode": "lexical", "k": 5}),
    "by_tag_date": ("search", {"query": "rank", "tags": ["search"], "date_from": "2024-01-01", "k": 5}),
    "read": ("read", {"note": "concepts/rrf.md"}),
    "read_title": ("read", {"note": "Reciprocal Rank Fusion", "section": "Formula"}),
    "read_lines": ("read", {"note": "rrf", "line_start": 13, "line_end": 15}),
    "missing": ("read", {"note": "reciprocal rank fushion"}),
    "missing_section": ("read", {"note": "rrf", "section": "Formulae"}),
    "outside_dotdot": ("read", {"note": "../secret.md"}),
    "outside_abs": ("read", {"note": "{parent}/secret.md"}),
    "related": ("related", {"note": "rrf"}),
    "backlinks": ("related", {"note": "rrf", "direction": "backlinks"}),
    "unresolved": ("related", {"note": "rrf", "direction": "unresolved"}),
    "deep": ("related", {"note": "2024-06-11", "direction": "links", "depth": 2}),
    "context": ("context", {"query": "how does RRF merge lists", "budget": 120}),
    "status": ("status", {}),
    "unknown_arg": ("search", {"query": "rank", "kk": 3}),
    "k_too_big": ("search", {"query": "rank", "k": 1000}),
    "k_wrong_type": ("search", {"query": "rank", "k": "many"}),
    "bad_mode": ("search", {"query": "rank", "mode": "fuzzy"}),
    "no_query": ("search", {"k": 3}),
    "half_range": ("read", {"note": "rrf", "line_start": 3}),
    "bad_direction": ("related", {"note": "rrf", "direction": "sideways"}),
    "deep_too_deep": ("related", {"note": "rrf", "depth": 9}),
    "status_extra": ("status", {"verbose": True}),
}


@dataclasses.dataclass
class Session:
    instructions: str
    tools: dict[str, Any]
    listed_after: float
    """Seconds from spawning the process to the first tool list (reported, not asserted)."""
    results: dict[str, Any]


async def _stdio_session(vault: Path) -> Session:
    params = StdioServerParameters(command=CLI[0], args=[*CLI[1:], "mcp", str(vault), "--no-e5"])
    started = time.perf_counter()
    with (vault.parent / "mcp-stderr.log").open("w") as errlog:
        async with stdio_client(params, errlog=errlog) as (read, write), ClientSession(read, write) as session:
            init = await session.initialize()
            listed = await session.list_tools()
            listed_after = time.perf_counter() - started
            results = {}
            for key, (name, args) in CALLS.items():
                args = {k: v.format(parent=vault.parent) if isinstance(v, str) else v for k, v in args.items()}
                results[key] = await session.call_tool(name, args)
    return Session(init.instructions or "", {t.name: t for t in listed.tools}, listed_after, results)


@pytest.fixture(scope="module")
def vault(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = write_vault(tmp_path_factory.mktemp("mcp") / "vault")
    done = subprocess.run([*CLI, "import", str(root), "--no-quality-tier"], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    return root


@pytest.fixture(scope="module")
def stdio(vault: Path) -> Session:
    session = asyncio.run(_stdio_session(vault))
    sys.stderr.write(f"\nmindnet mcp: first tool list {session.listed_after:.3f} s after spawn\n")
    return session


def text(result: Any) -> str:
    return "\n".join(c.text for c in result.content if getattr(c, "type", "") == "text")


def ok(session: Session, key: str) -> dict[str, Any]:
    result = session.results[key]
    assert not result.is_error, text(result)
    return dict(result.structured_content)


def error(session: Session, key: str) -> str:
    result = session.results[key]
    assert result.is_error, f"{key} should fail: {text(result)}"
    return text(result)


# -- the session -----------------------------------------------------------------------------------


def test_the_tools_are_listed_read_only_with_schemas(stdio: Session) -> None:
    assert set(stdio.tools) == TOOLS
    for tool in stdio.tools.values():
        assert tool.annotations is not None and tool.annotations.read_only_hint is True
        assert tool.annotations.destructive_hint is False
        assert tool.output_schema is not None
        assert tool.input_schema.get("additionalProperties") is False
        assert tool.description
    assert stdio.listed_after > 0


def test_the_instructions_describe_the_vault(stdio: Session) -> None:
    assert "4 notes" in stdio.instructions
    assert "de (1)" in stdio.instructions and "en (3)" in stdio.instructions
    assert "concept (2)" in stdio.instructions
    assert "search (1)" in stdio.instructions  # a tag


def test_a_search_returns_cited_hits(stdio: Session) -> None:
    found = ok(stdio, "search")
    hits = found["hits"]
    assert hits and hits[0]["note_id"] == "rrf"
    for hit in hits:
        assert set(hit) >= {"note_id", "path", "title", "section_path", "line_start", "line_end", "score", "snippet"}
        assert 1 <= hit["line_start"] <= hit["line_end"]
        assert hit["snippet"]
    first = hits[0]
    file_lines = NOTES[first["path"]].split("\n")
    cited = " ".join(file_lines[first["line_start"] - 1 : first["line_end"]])
    assert first["snippet"].removesuffix("…").split()[-1] in cited
    assert first["path"] in text(stdio.results["search"])


def test_several_queries_are_fused_into_one_list(stdio: Session) -> None:
    hits = ok(stdio, "fused")["hits"]
    notes = [h["note_id"] for h in hits]
    assert "rrf" in notes and "tomaten" in notes
    assert len(notes) == len(set(notes))  # by_note: one hit per note
    assert [h["rank"] for h in hits] == list(range(1, len(hits) + 1))


def test_by_default_each_note_comes_once_with_its_best_passages(stdio: Session) -> None:
    found = ok(stdio, "grouped")
    notes = [n["note_id"] for n in found["notes"]]
    assert notes and len(notes) == len(set(notes)) <= 4 and {"rrf", "tomaten"} <= set(notes)
    for n in found["notes"]:
        assert n["sections"] and all(h["note_id"] == n["note_id"] for h in n["sections"])
        assert [h["rank"] for h in n["sections"]] == list(range(1, len(n["sections"]) + 1))
    assert [h["chunk_id"] for h in found["hits"]] == [h["chunk_id"] for n in found["notes"] for h in n["sections"]]
    assert [n["rank"] for n in found["notes"]] == list(range(1, len(notes) + 1))


def test_explain_gives_each_passage_parts_that_add_up_to_its_score(stdio: Session) -> None:
    hits = ok(stdio, "explained")["hits"]
    assert hits
    for h in hits:
        parts = h["explain"]
        assert parts and abs(sum(p["score"] for p in parts) - h["score"]) < 1e-6
        assert {p["list"] for p in parts if p["list"] not in ("slots", "exact", "note_sum")} == set(h["via"].split("+"))
    assert all(h.get("explain") is None for h in ok(stdio, "search")["hits"])


def test_filters_restrict_the_hits(stdio: Session) -> None:
    typed = ok(stdio, "by_type")["hits"]
    assert typed and {h["note_id"] for h in typed} <= {"rrf", "overlap"}
    german = ok(stdio, "by_lang")["hits"]
    assert german and {h["lang"] for h in german} == {"de"}
    in_folder = ok(stdio, "by_path")["hits"]
    assert in_folder and all(h["path"].startswith("concepts/") for h in in_folder)
    tagged = ok(stdio, "by_tag_date")["hits"]
    assert tagged and {h["note_id"] for h in tagged} == {"rrf"}


def test_read_a_whole_note_a_section_and_a_line_range(stdio: Session) -> None:
    whole = ok(stdio, "read")
    assert whole["note"]["title"] == "Reciprocal Rank Fusion"
    assert "Cormack and Clarke" in whole["text"] and "RRF merges" in whole["text"]
    assert [s["path"] for s in whole["sections"]] == ["/", "/Formula", "/History"]
    section = ok(stdio, "read_title")
    assert section["section"] == "/Formula"
    assert "one over sixty" in section["text"] and "Cormack" not in section["text"]
    lines = ok(stdio, "read_lines")
    file_lines = NOTES["concepts/rrf.md"].split("\n")
    assert (lines["line_start"], lines["line_end"]) == (13, 15)
    assert lines["text"].split("\n") == file_lines[12:15]


def test_a_missing_note_names_the_closest_ones(stdio: Session) -> None:
    message = error(stdio, "missing")
    assert "reciprocal rank fushion" in message and "concepts/rrf.md" in message
    assert "closest" in message
    section = error(stdio, "missing_section")
    assert "Formulae" in section and "/Formula" in section


def test_nothing_outside_the_vault_is_read(stdio: Session) -> None:
    for key in ("outside_dotdot", "outside_abs"):
        message = error(stdio, key)
        assert SECRET not in message
        assert "vault" in message


def test_related_walks_links_backlinks_and_unresolved(stdio: Session) -> None:
    both = ok(stdio, "related")["links"]
    assert {(x["note_id"], x["direction"]) for x in both} >= {("overlap", "out"), ("2024-06-11", "in")}
    assert {x["direction"] for x in ok(stdio, "backlinks")["links"]} == {"in"}
    unresolved = ok(stdio, "unresolved")["links"]
    assert unresolved and all(x["status"] == "unresolved" for x in unresolved)
    assert any("bm25" in x["title"].lower() for x in unresolved)
    deep = ok(stdio, "deep")["links"]
    assert any(x["note_id"] == "overlap" and x["depth"] == 2 and x["via"] == "rrf" for x in deep)


def test_context_stays_in_budget_with_citations(stdio: Session) -> None:
    found = ok(stdio, "context")
    assert 0 < found["tokens"] <= 120
    assert found["citations"] and found["citations"][0]["note_id"] == "rrf"
    assert "[1]" in found["text"]


def test_status_counts_the_index(stdio: Session) -> None:
    found = ok(stdio, "status")
    assert found["notes"] == 4 and found["chunks"] >= 4
    assert found["resident"] is not None  # this process owns the index (no serve runs)


@pytest.mark.parametrize(
    ("key", "argument"),
    [("unknown_arg", "kk"), ("k_too_big", "k"), ("k_wrong_type", "k"), ("bad_mode", "mode"),
     ("no_query", "query"), ("half_range", "line_end"), ("bad_direction", "direction"),
     ("deep_too_deep", "depth"), ("status_extra", "verbose")],
)
def test_a_wrong_argument_is_an_error_naming_it(stdio: Session, key: str, argument: str) -> None:
    assert f"'{argument}'" in error(stdio, key)


# -- stdout carries only the protocol ----------------------------------------------------------------


def test_stdout_carries_only_protocol_messages(vault: Path) -> None:
    """A raw session (no SDK parsing that could hide a stray line): every stdout line is JSON-RPC."""
    messages = [
        {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "raw", "version": "0"}}},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/list"},
        {"jsonrpc": "2.0", "id": 3, "method": "tools/call",
         "params": {"name": "search", "arguments": {"query": "Tomaten", "k": 2}}},
    ]
    proc = subprocess.Popen([*CLI, "mcp", str(vault), "--no-e5"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    assert proc.stdin is not None and proc.stdout is not None
    answers: dict[int, Any] = {}
    try:
        for message in messages:
            proc.stdin.write(json.dumps(message) + "\n")
            proc.stdin.flush()
            if "id" in message:
                while message["id"] not in answers:
                    line = proc.stdout.readline()
                    assert line, f"mcp exited: {proc.stderr.read() if proc.poll() is not None else ''}"
                    parsed = json.loads(line)  # a stray print would fail here
                    assert parsed["jsonrpc"] == "2.0"
                    if "id" in parsed:
                        answers[parsed["id"]] = parsed
    finally:
        proc.stdin.close()
        code = proc.wait(timeout=120)
    assert code == 0
    assert answers[1]["result"]["serverInfo"]["name"] == "mindnet"
    assert {t["name"] for t in answers[2]["result"]["tools"]} == TOOLS
    assert answers[3]["result"]["structuredContent"]["hits"][0]["note_id"] == "tomaten"
    assert proc.stdout.read() == ""


# -- Streamable HTTP on mindnet serve ----------------------------------------------------------------


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    root = write_vault(tmp_path_factory.mktemp("mcp-serve") / "vault")
    server = Server(root, "--no-e5", env={**os.environ, "MINDNET_API_KEY": "k3y"})
    wait_for(lambda: server.get("/api/status", {"Authorization": "Bearer k3y"})[1].get("notes") == 4,
             "the first import")
    yield server
    assert server.stop() == 0


async def _http_session(url: str, key: str) -> tuple[set[str], Any, Any, Any]:
    async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {key}"}, timeout=120) as client, \
            streamable_http_client(url + "/mcp", http_client=client) as streams, \
            ClientSession(streams[0], streams[1]) as session:
        await session.initialize()
        listed = await session.list_tools()
        hits = await session.call_tool("search", {"query": "Tomaten Garten", "k": 2})
        outside = await session.call_tool("read", {"note": "../secret.md"})
        unknown = await session.call_tool("related", {"note": "rrf", "hops": 2})
        return {t.name for t in listed.tools}, hits, outside, unknown


def test_the_tools_answer_over_streamable_http_on_serve(served: Server) -> None:
    names, hits, outside, unknown = asyncio.run(_http_session(served.url, "k3y"))
    assert names == TOOLS
    assert not hits.is_error and hits.structured_content["hits"][0]["note_id"] == "tomaten"
    assert outside.is_error and SECRET not in text(outside)
    assert unknown.is_error and "'hops'" in text(unknown)


async def _stdio_calls(vault: Path, calls: list[tuple[str, dict[str, Any]]], errlog: Path) -> list[Any]:
    params = StdioServerParameters(command=CLI[0], args=[*CLI[1:], "mcp", str(vault), "--no-e5"])
    with errlog.open("w") as err:
        async with stdio_client(params, errlog=err) as (read, write), ClientSession(read, write) as session:
            await session.initialize()
            return [await session.call_tool(name, args) for name, args in calls]


def test_stdio_asks_the_running_serve(served: Server) -> None:
    """With a serve holding the store (single-process), `mindnet mcp` answers through it."""
    log = served.vault.parent / "mcp-remote.log"
    found, page, missing, extra = asyncio.run(_stdio_calls(served.vault, [
        ("search", {"query": ["Tomaten", "ranked lists"], "k": 4, "tags": ["garten"]}),
        ("read", {"note": "rrf", "section": "History"}),
        ("read", {"note": "overlapp"}),
        ("search", {"query": "x", "limit": 3}),
    ], log))
    assert "using mindnet serve" in log.read_text()
    assert not found.is_error and [h["note_id"] for h in found.structured_content["hits"]] == ["tomaten"]
    assert not page.is_error and "Cormack" in page.structured_content["text"]
    assert missing.is_error and "concepts/overlap.md" in text(missing)
    assert extra.is_error and "'limit'" in text(extra)


def test_the_mcp_endpoint_sits_behind_the_guard(served: Server) -> None:
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}).encode()
    headers = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
    import urllib.error
    import urllib.request

    def post(extra: dict[str, str]) -> int:
        request = urllib.request.Request(served.url + "/mcp", data=body, headers=headers | extra, method="POST")
        try:
            with urllib.request.urlopen(request, timeout=60) as response:
                return response.status
        except urllib.error.HTTPError as exc:
            return exc.code

    assert post({}) == 401  # no key
    assert post({"Authorization": "Bearer wrong"}) == 401
    assert post({"Authorization": "Bearer k3y", "Host": "evil.example"}) == 421  # DNS rebinding
    assert post({"Authorization": "Bearer k3y", "Origin": "http://evil.example"}) == 403


def test_the_tools_modes_are_the_search_modes() -> None:
    from typing import get_args

    from mindnet import MODES
    from mindnet.mcp.tools import Mode

    assert set(get_args(Mode)) == set(MODES)


# -- the pure helpers behind the tools ---------------------------------------------------------------


def _hit(note: str, chunk: str, rank: int) -> Hit:
    return Hit(rank=rank, score=1.0 / rank, note_id=note, path=f"{note}.md", title=note, chunk_id=chunk,
               section_path="/", section_title="", text="t", char_start=0, char_end=1, line_start=1, line_end=1,
               lang="en", via="dense")


ranked = st.lists(st.sampled_from([f"n{i}#c{j}" for i in range(4) for j in range(3)]), unique=True, max_size=8)


@given(st.lists(ranked, min_size=1, max_size=4), st.integers(min_value=1, max_value=10), st.booleans())
def test_fused_hits_are_a_ranking_of_the_inputs(lists: list[list[str]], k: int, by_note: bool) -> None:
    hits = [[_hit(c.split("#")[0], c, r) for r, c in enumerate(chunks, 1)] for chunks in lists]
    fused = fuse_hits(hits, k, by_note=by_note)
    keys = [h.note_id if by_note else h.chunk_id for h in fused]
    given_keys = {h.note_id if by_note else h.chunk_id for hs in hits for h in hs}
    assert len(keys) == len(set(keys)) == min(k, len(given_keys))
    assert set(keys) <= given_keys
    assert [h.rank for h in fused] == list(range(1, len(fused) + 1))
    assert all(a.score >= b.score for a, b in itertools.pairwise(fused))
    firsts = {hs[0].chunk_id for hs in hits if hs}
    if len(firsts) == 1 and all(hs for hs in hits) and not by_note:
        assert fused[0].chunk_id in firsts  # first everywhere stays first


@given(st.text(min_size=0, max_size=600), st.lists(st.text(max_size=20), max_size=3),
       st.integers(min_value=20, max_value=300))
def test_a_snippet_is_short_and_taken_from_the_text(body: str, queries: list[str], width: int) -> None:
    cut = snippet(body, queries, width)
    flat = " ".join(body.split())
    assert len(cut) <= width + 2
    assert cut.strip("…").strip() in flat


@given(st.lists(st.tuples(st.integers(min_value=1, max_value=4), st.text("ab", min_size=1, max_size=3)),
                max_size=8))
def test_sections_nest_and_end_before_the_next_peer(headings: list[tuple[int, str]]) -> None:
    sections = [{"level": lvl, "title": t, "line": 2 * i + 1} for i, (lvl, t) in enumerate(headings)]
    last = 2 * len(headings) + 5
    out = section_paths(sections, last)
    for i, s in enumerate(out):
        assert s["line"] <= s["end_line"] <= last
        assert s["path"].startswith("/")
        peers = [t for t in out[i + 1 :] if t["level"] <= s["level"]]
        assert s["end_line"] == (peers[0]["line"] - 1 if peers else last)
        if s["level"] >= 2:
            assert s["path"].endswith("/" + s["title"])
