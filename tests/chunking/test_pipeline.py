"""The per-note pipeline: chunk records as the importer stores them."""

from __future__ import annotations

import dataclasses

from fakes import make_note
from mindnet.chunking.pipeline import chunk_note
from mindnet.config import Settings
from mindnet.links import Resolver


def test_a_chunk_opening_with_code_takes_the_language_of_its_prose() -> None:
    """The first 600 characters of *prose* decide: 700 characters of code first must not make it English."""
    lines = [f"fn handler_{i}(stream: TcpStream) -> Result<(), Error> {{ Ok(()) }}" for i in range(10)]
    code = '<span class="filename">Dateiname: src/main.rs</span>\n\n```rust\n' + "\n".join(lines) + "\n```\n\n"
    prose = ("Der Server liest nun jede Anfrage in einer eigenen Funktion und schickt die Antwort zurück. "
             "Damit ist die Behandlung der Verbindung vom Rest des Programms getrennt.")
    note = dataclasses.replace(make_note("server.md", code + prose), lang="de")
    chunks = chunk_note(note, Settings(), Resolver([note]))
    assert len(code) > 600
    assert len(chunks) == 1  # code and prose in one chunk: the case that went wrong
    assert chunks[0].lang == "de"
