"""Which findings `mindnet lint` reports (`--select`, `--ignore`) and how it prints them (`--format`)."""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence

from ..errors import ConfigError, printable
from .rules import RULES, Finding

FORMATS = ("text", "json", "github")


def parse_codes(values: Iterable[str] | None) -> tuple[str, ...]:
    """Codes or code prefixes from `--select`/`--ignore` values (comma-separated, repeatable).

    Raises:
        ConfigError: a value that is the prefix of no rule code.
    """
    codes: list[str] = []
    for value in values or ():
        for part in value.split(","):
            code = part.strip().upper()
            if not code:
                continue
            if code != "ALL" and not any(c.startswith(code) for c in RULES):
                raise ConfigError(f"unknown rule code {part.strip()!r}; codes are {', '.join(RULES)}")
            codes.append(code)
    return tuple(codes)


def is_selected(code: str, select: Sequence[str], ignore: Sequence[str]) -> bool:
    if select and not any(s == "ALL" or code.startswith(s) for s in select):
        return False
    return not any(i == "ALL" or code.startswith(i) for i in ignore)


def format_findings(findings: Sequence[Finding], output_format: str) -> str:
    """Findings as `text` (`path:line:col: CODE message`), `json` (a list) or `github` (annotations).

    Raises:
        ConfigError: an unknown format.
    """
    if output_format == "text":
        return "".join(f"{printable(f.path)}:{f.line}:{f.col}: {f.code} {printable(f.message)}\n" for f in findings)
    if output_format == "json":
        return json.dumps([f.as_dict() for f in findings], ensure_ascii=False, indent=2) + "\n"
    if output_format == "github":
        return "".join(_github(f) for f in findings)
    raise ConfigError(f"unknown lint format {output_format!r}; one of {', '.join(FORMATS)}")


def _github(f: Finding) -> str:
    """A GitHub Actions workflow command; `%`, CR, LF (and `:` `,` in properties) must be escaped."""

    def data(text: str) -> str:
        return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")

    def prop(text: str) -> str:
        return data(text).replace(":", "%3A").replace(",", "%2C")

    return f"::{f.severity} file={prop(f.path)},line={f.line},col={f.col},title={f.code}::{data(f.message)}\n"


def summary_line(findings: Sequence[Finding], files: int) -> str:
    """One line for stderr: counts by severity and how many `--fix` could repair."""
    if not findings:
        return f"no findings in {files} file{'s' if files != 1 else ''}"
    errors = sum(1 for f in findings if f.severity == "error")
    fixable = sum(1 for f in findings if f.fix)
    text = f"{len(findings)} finding{'s' if len(findings) != 1 else ''} ({errors} error{'s' if errors != 1 else ''}, "
    text += f"{len(findings) - errors} warning{'s' if len(findings) - errors != 1 else ''}) "
    text += f"in {files} file{'s' if files != 1 else ''}"
    return text + (f"; {fixable} fixable with --fix" if fixable else "")
