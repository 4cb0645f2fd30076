"""Vault hygiene (R27): rules over notes, findings with stable codes, three output formats, safe fixes.

`lint_vault` reads a vault the way an import does (`vault.read_note`, `links.Resolver`: link integrity is
judged by the resolver that builds the graph) and turns every problem into a `Finding` at `path:line:col`
(1-based; columns count characters; a link at its `[[`, a field at its key, a whole-file finding at 1:1).
A code is never reused for another meaning; `--fix` never changes a note's body (`lint.fixes` proves each
edit safe). The codes, the schemes and the exit code: docs/lint.md.

Modules, in pipeline order: `rules` (`Finding`, the checks of one note), `formats` (selection and output),
`fixes` (`--fix`), `cache` (the on-disk vault index), `runner` (`lint_vault`, `run_lint`).
"""

from ..vault_paths import VAULT_MARKERS, find_vault_root, group_paths
from .cache import CACHE_FILE, IndexEntry, VaultIndex, cache_file, refresh_index
from .fixes import FixError, FixSummary, fix_notes, fix_text
from .formats import FORMATS, format_findings, parse_codes, summary_line
from .rules import (
    RULES,
    Finding,
    IdScheme,
    Rule,
    Severity,
    check_note,
    compile_id_scheme,
    normalise_tags,
    problem_finding,
    scheme_problem,
)
from .runner import LintReport, LintRun, lint_vault, run_lint
from .runner import _display_prefix as _display_prefix  # the CLI tests build expected paths with it

__all__ = [
    "CACHE_FILE",
    "FORMATS",
    "RULES",
    "VAULT_MARKERS",
    "Finding",
    "FixError",
    "FixSummary",
    "IdScheme",
    "IndexEntry",
    "LintReport",
    "LintRun",
    "Rule",
    "Severity",
    "VaultIndex",
    "cache_file",
    "check_note",
    "compile_id_scheme",
    "find_vault_root",
    "fix_notes",
    "fix_text",
    "format_findings",
    "group_paths",
    "lint_vault",
    "normalise_tags",
    "parse_codes",
    "problem_finding",
    "refresh_index",
    "run_lint",
    "scheme_problem",
    "summary_line",
]
