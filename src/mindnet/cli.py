"""The `mindnet` and `mindnet-chunk` commands: parse options, call the library, render. No logic here."""

from __future__ import annotations

import json
import sys
from collections import Counter
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table

from .config import Settings, load_settings
from .errors import MindnetError
from .vault import VaultResult, read_vault

app = typer.Typer(add_completion=False, no_args_is_help=True, help=__doc__)
out = Console()
err = Console(stderr=True)

VaultArg = Annotated[Path, typer.Argument(help="The vault folder.", show_default=False)]
ConfigOpt = Annotated[Path | None, typer.Option("--config", help="A mindnet.toml to use instead of the vault's.")]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print one JSON object for programs.")]


@app.callback()
def _root() -> None:
    """mindnet: your Markdown vault as a searchable knowledge network."""


def _settings(vault: Path | None, config: Path | None, **flags: object) -> Settings:
    return load_settings(vault, config, overrides=flags)


def _report_problems(result: VaultResult) -> None:
    for problem in result.problems:
        err.print(problem.one_line(), markup=False, highlight=False)


@app.command("import")
def import_(
    vault: VaultArg,
    config: ConfigOpt = None,
    strict: Annotated[bool, typer.Option("--strict", help="Missing required fields are errors.")] = False,
    as_json: JsonOpt = False,
) -> None:
    """Import a vault (for now: read it and print the summary)."""
    settings = _settings(vault, config, strict=strict or None)
    result = read_vault(vault, settings)
    _report_problems(result)
    summary = vault_summary(result)
    if as_json:
        out.print_json(json.dumps(summary))
    else:
        _print_summary(summary)
    if result.failed:
        raise typer.Exit(1)


def vault_summary(result: VaultResult) -> dict[str, object]:
    notes = result.notes
    return {
        "vault": result.root,
        "notes": len(notes),
        "failed": result.failed,
        "types": dict(Counter(n.type for n in notes).most_common()),
        "languages": dict(Counter(n.lang for n in notes).most_common()),
        "warnings": sum(len(n.warnings) for n in notes),
        "attachments": len(result.attachments),
    }


def _print_summary(summary: dict[str, object]) -> None:
    table = Table(title=f"vault {summary['vault']}", show_header=False)
    for key in ("notes", "failed", "types", "languages", "warnings", "attachments"):
        value = summary[key]
        if isinstance(value, dict):
            value = ", ".join(f"{k} {v}" for k, v in value.items())
        table.add_row(key, str(value))
    out.print(table)


def main() -> None:
    """Console entry point: library errors become one stderr line and exit code 2."""
    try:
        app()
    except MindnetError as exc:
        err.print(f"mindnet: {exc}", markup=False, highlight=False)
        sys.exit(2)
