"""The store an import makes of foam-docs, against a fixture written before the streaming import (issue 27).

The import was rebuilt to work in bounded batches with compact indexes instead of every note's parse.
Links, backlinks and unresolved links must come out exactly as the previous implementation wrote them,
whether the vault is imported at once, in small batches, or in two steps where links to notes that do
not exist yet resolve on the second run. The fixture holds every edge and note payload (note text as a
hash) and every chunk payload (chunk text as a hash); `python tests/test_foam_graph.py` writes it again.
"""

from __future__ import annotations

import dataclasses
import gzip
import hashlib
import json
import os
import shutil
import sys
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from conftest import corpus
from fakes import FakeEmbedder
from mindnet.api import Index
from mindnet.config import Settings
from mindnet.sync import open_store

FIXTURE = Path(__file__).parent / "fixtures" / "foam_graph.json.gz"
LATER = ("user/features/graph-view.md", "user/getting-started/first-workspace.md",
         "user/features/templates.md", "user/features/tags.md", "user/features/wikilinks.md")
"""Notes left out of the first run of the two-step import: other notes link to them."""


def store_payloads(vault: Path) -> dict[str, dict[str, dict[str, Any]]]:
    """Every point's payload per collection, long texts replaced by their hash."""
    store = open_store(vault, WRITTEN_WITH)
    try:
        store.ensure(store.meta())  # type: ignore[arg-type]
        out: dict[str, dict[str, dict[str, Any]]] = {}
        for name in ("notes", "chunks", "edges"):
            out[name] = {}
            for p in store.scroll(name):
                payload = dict(p.payload)
                for key in ("fulltext", "text"):
                    if key in payload:
                        payload[key] = hashlib.sha256(str(payload[key]).encode()).hexdigest()
                out[name][p.id] = payload
        return out
    finally:
        store.close()


WRITTEN_WITH = Settings(note_windows=64)
"""The settings the fixture was written with: the window cap was 64 then, and it is part of every note's
`chunking_hash` (a store records what wrote it), not of the links this file is about."""


def imported(vault: Path, settings: Settings | None = None) -> None:
    with Index(vault, settings or WRITTEN_WITH, embedder=FakeEmbedder()) as index:
        index.import_vault(e5=False)


FIXED_MTIME = 1_796_187_300
"""2026-12-02T04:55:00Z. Notes without `created` take their file's mtime, and a checkout's mtimes are
whenever it was made: every copy is stamped with this time so the payloads can be compared."""


def _copy(tmp: Path, source: Path | None = None) -> Path:
    vault = tmp / "vault"
    shutil.copytree(source or corpus("foam-docs/vault"), vault, ignore=shutil.ignore_patterns(".mindnet"))
    for path in vault.rglob("*"):
        if path.is_file():
            os.utime(path, (FIXED_MTIME, FIXED_MTIME))
    return vault


_UNSET: dict[str, Any] = {"anchor": None, "raw_links": [], "link_keys": []}
"""What the fixture's importer wrote for an edge's unset fields, which `Edge.payload` now leaves out."""


def _unset_left_out(payloads: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Edge payloads without `edge_key` and without an unset `anchor`, `raw_links` or `link_keys`: an edge's
    payload leaves those out (`Edge.payload`), where the fixture's importer wrote `None`, `[]` and the key again;
    both read back as the same edge (`edge_from_payload`), and the key is still compared as the point's `edge_id`.
    Any other field, and any of these set to something, still differs."""
    return {pid: {k: v for k, v in payload.items() if k != "edge_key" and (k not in _UNSET or v != _UNSET[k])}
            for pid, payload in payloads.items()}


def _differences(got: dict[str, Any], want: dict[str, Any]) -> list[str]:
    lines: list[str] = []
    for name in sorted(set(got) | set(want)):
        have, expected = got.get(name, {}), want.get(name, {})
        if name == "edges":
            have, expected = _unset_left_out(have), _unset_left_out(expected)
        for pid in sorted(set(have) | set(expected)):
            if pid not in have or pid not in expected:
                lines.append(f"{name} {pid}: {'missing' if pid not in have else 'extra'}")
                continue
            for key in sorted(set(have[pid]) | set(expected[pid])):
                if have[pid].get(key) != expected[pid].get(key):
                    lines.append(f"{name} {pid} {key}: got {have[pid].get(key)!r:.200}, "
                                 f"want {expected[pid].get(key)!r:.200}")
    return lines


def _fixture() -> dict[str, Any]:
    with gzip.open(FIXTURE, "rt", encoding="utf-8") as fh:
        return json.load(fh)


def test_a_cold_import_writes_what_the_previous_importer_wrote(tmp_path: Path) -> None:
    vault = _copy(tmp_path)
    imported(vault)
    assert _differences(store_payloads(vault), _fixture()) == []


def test_links_to_notes_added_later_resolve_as_in_one_import(tmp_path: Path) -> None:
    vault = _copy(tmp_path)
    held = tmp_path / "held"
    for rel in LATER:
        (held / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.move(vault / rel, held / rel)
    imported(vault)
    before = store_payloads(vault)
    assert any(e["status"] == "unresolved" and e["target_id"] == "graph-view"
               for e in before["edges"].values()), "the first run must leave links unresolved"
    for rel in LATER:
        shutil.move(held / rel, vault / rel)
    imported(vault)
    assert _differences(store_payloads(vault), _fixture()) == []


@pytest.mark.parametrize("batch_notes", [1, 7])
def test_small_import_batches_write_what_one_batch_writes(tmp_path: Path, batch_notes: int,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """Notes loaded, linked and written a few at a time, and only the first few embedded during the read."""
    import mindnet.sync

    monkeypatch.setattr(mindnet.sync._EmbedWhileReading, "EARLY_CHUNKS", 20)
    vault = _copy(tmp_path)
    imported(vault, dataclasses.replace(WRITTEN_WITH, import_batch_notes=batch_notes))
    assert _differences(store_payloads(vault), _fixture()) == []


def main() -> None:
    """Write the fixture from the current importer (run it only when a payload change is intended)."""
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        vault = _copy(Path(tmp), Path(__file__).resolve().parents[2] / "shared/corpora/foam-docs/vault")
        imported(vault)
        data = store_payloads(vault)
    FIXTURE.parent.mkdir(parents=True, exist_ok=True)
    with gzip.GzipFile(FIXTURE, "wb", mtime=0) as fh:
        fh.write(json.dumps(data, sort_keys=True, ensure_ascii=False).encode("utf-8"))
    print(FIXTURE, {k: len(v) for k, v in data.items()})


if __name__ == "__main__":
    main()
