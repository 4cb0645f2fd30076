"""mindnet: a vault of Markdown notes as a retrievable knowledge network in Qdrant.

This package root is the public API: the CLI, the server and programs import from here (or from
`mindnet.api`), never from a stage module. Names load on first use (PEP 562), so
`from mindnet import run_lint` starts in a fraction of a second without loading Qdrant or a model.

    from mindnet import Index
    with Index("~/notes") as index:
        index.import_vault()
        hits = index.search("Wie funktioniert RRF?", k=5, by_note=True)
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from .version import __version__ as __version__

_EXPORTS: dict[str, str] = {
    # reading and chunking
    "Vault": "reading", "note_from_text": "reading", "Note": "vault", "NoteProblem": "vault", "VaultResult": "vault",
    "read_vault": "vault", "Chunk": "chunking.base", "chunk_note": "chunking.pipeline", "chunk_payload": "points",
    "group_paths": "vault_paths", "ndjson": "reading", "chunk_jobs": "reading",
    # the index and what it returns
    "Index": "api", "IndexStatus": "api", "ImportSummary": "sync", "Progress": "sync", "GRAPH_VIEWS": "reading",
    "MAX_GRAPH_DEPTH": "reading", "vault_relative": "api", "MAX_QUERY_CHARS": "api", "MAX_QUERIES": "api",
    "MAX_REF_CHARS": "api",
    "Hit": "search", "NoteHit": "search", "Explanation": "search",
    "Context": "search", "Citation": "search", "SearchFilters": "search", "MODES": "search",
    "snippet": "search", "check_date": "search",
    # settings and errors
    "Settings": "config", "load_settings": "config", "store_dir": "config", "prepare_store_dir": "config",
    "last_overview": "config",
    "MindnetError": "errors", "NoteError": "errors", "ConfigError": "errors", "InputError": "errors",
    "ChunkingError": "errors", "StoreError": "errors", "NotFoundError": "errors", "VaultNotFoundError": "errors",
    "location": "errors", "printable": "errors", "mib": "errors",
    # the resident server (serve, watch, mcp) and how clients find it
    "preload_models": "preload", "ModelsLoading": "preload",
    "Resident": "service", "ServerAddress": "address", "find_server": "address", "read_address": "address",
    "write_address": "address", "remove_address": "address", "socket_path": "address",
    # lint (R27) and evaluation (R28)
    "run_lint": "lint", "LintRun": "lint", "LINT_FORMATS": "lint", "parse_codes": "lint",
    "format_findings": "lint", "lint_summary_line": "lint",
    "evaluate_vault": "evaluation", "evaluate_beir": "evaluation", "load_beir": "evaluation",
    "format_table": "evaluation",
}
_RENAMED = {"LINT_FORMATS": "FORMATS", "lint_summary_line": "summary_line"}
"""Public names that differ from the stage module's own, where the bare name would be ambiguous."""

__all__ = [
    "GRAPH_VIEWS",
    "LINT_FORMATS",
    "MAX_GRAPH_DEPTH",
    "MAX_QUERIES",
    "MAX_QUERY_CHARS",
    "MAX_REF_CHARS",
    "MODES",
    "Chunk",
    "ChunkingError",
    "Citation",
    "ConfigError",
    "Context",
    "Explanation",
    "Hit",
    "ImportSummary",
    "Index",
    "IndexStatus",
    "InputError",
    "LintRun",
    "MindnetError",
    "ModelsLoading",
    "NotFoundError",
    "Note",
    "NoteError",
    "NoteHit",
    "NoteProblem",
    "Progress",
    "Resident",
    "SearchFilters",
    "ServerAddress",
    "Settings",
    "StoreError",
    "Vault",
    "VaultNotFoundError",
    "VaultResult",
    "check_date",
    "chunk_jobs",
    "chunk_note",
    "chunk_payload",
    "evaluate_beir",
    "evaluate_vault",
    "find_server",
    "format_findings",
    "format_table",
    "group_paths",
    "last_overview",
    "lint_summary_line",
    "load_beir",
    "load_settings",
    "location",
    "mib",
    "ndjson",
    "note_from_text",
    "parse_codes",
    "preload_models",
    "prepare_store_dir",
    "printable",
    "read_address",
    "read_vault",
    "remove_address",
    "run_lint",
    "snippet",
    "socket_path",
    "store_dir",
    "vault_relative",
    "write_address",
]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'mindnet' has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{module}", __name__), _RENAMED.get(name, name))
    globals()[name] = value  # later lookups skip this function
    return value


def __dir__() -> list[str]:
    return [*globals(), *__all__]


if TYPE_CHECKING:  # for type checkers and editors; at run time the names load lazily
    from .address import ServerAddress, find_server, read_address, remove_address, socket_path, write_address
    from .api import MAX_QUERIES, MAX_QUERY_CHARS, MAX_REF_CHARS, Index, IndexStatus, vault_relative
    from .chunking.base import Chunk
    from .chunking.pipeline import chunk_note
    from .config import Settings, last_overview, load_settings, prepare_store_dir, store_dir
    from .errors import (
        ChunkingError,
        ConfigError,
        InputError,
        MindnetError,
        NoteError,
        NotFoundError,
        StoreError,
        VaultNotFoundError,
        location,
        mib,
        printable,
    )
    from .evaluation import evaluate_beir, evaluate_vault, format_table, load_beir
    from .lint import FORMATS as LINT_FORMATS
    from .lint import LintRun, format_findings, parse_codes, run_lint
    from .lint import summary_line as lint_summary_line
    from .points import chunk_payload
    from .preload import ModelsLoading, preload_models
    from .reading import GRAPH_VIEWS, MAX_GRAPH_DEPTH, Vault, chunk_jobs, ndjson, note_from_text
    from .search import MODES, Citation, Context, Hit, SearchFilters, check_date, snippet
    from .service import Resident
    from .sync import ImportSummary, Progress
    from .vault import Note, NoteProblem, VaultResult, read_vault
    from .vault_paths import group_paths
