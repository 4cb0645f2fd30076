"""Vault hygiene (R27): rules over notes, findings with stable codes, three output formats, safe fixes.

`lint_vault` reads a vault the way an import does (`vault.read_note`, `links.Resolver`: link
integrity is judged by exactly the resolver that builds the graph, never a second one) and turns
every problem into a `Finding` at `path:line:col`. Lines and columns are 1-based; columns count
characters. A link points at its `[[` (or `[` of a Markdown link), a frontmatter field at its key,
and a finding about the whole file at 1:1.

Rule codes are stable: a code is never reused for another meaning, new rules get new codes.

| code  | severity | fix | rule |
| ----- | -------- | --- | ---- |
| MN001 | warning² | yes¹ | missing required field(s) `title, id, type, status, created, tags` (R2) |
| MN002 | error    |     | malformed YAML frontmatter, or not a mapping; the file is skipped (R3) |
| MN003 | error    |     | unreadable: bad UTF-8 (text or file name), NUL byte, size limit, I/O error, outside vault |
| MN004 | error    |     | empty file; skipped (R3) |
| MN005 | warning  |     | not followed: symlink leaving the vault, broken symlink or loop, unreadable folder (R1) |
| MN006 | warning  |     | YAML value repaired on reading (`key: #x`, `key: a: b`); quote the value |
| MN007 | warning  |     | UTF-8 byte order mark |
| MN009 | warning  |     | any other reader warning (`Note.warnings`) without a rule of its own |
| MN010 | warning  |     | unresolved link (body, or a frontmatter link field); an `unresolved` edge (R15) |
| MN011 | warning  |     | ambiguous link: several notes or files match, the shortest path wins (R15) |
| MN012 | warning  |     | missing attachment: the link names a file type that is not in the vault |
| MN013 | warning  |     | link to a note the import skips (MN002-MN004, MN020): names its file and problem line |
| MN020 | error    |     | duplicate `id`, on every note sharing it; import keeps the first path (R3) |
| MN030 | warning  |     | id or filename outside `id_scheme`, or its type segment is not the note's `type` |
| MN031 | warning  |     | tag outside `tag_scheme` (`area/…`, `type/…`, `topic/…`) |
| MN032 | warning  | yes | tags not normalised: leading `#`, spaces, duplicates, empty items, `a, b` string |

² An error with `--strict` (R2).
¹ `--fix` writes the defaults of `id`, `title` and `created` into the frontmatter (freezing what
the import already uses); `type`, `status` and `tags` need a human decision.

Exit code (R25): 1 when a finding is an error (or any finding under `--strict`), else 0.
`id_scheme` and `tag_scheme` (in `mindnet.toml`) are off by default, so vaults that follow
other conventions get no MN030/MN031 findings. `id_scheme` names one or more schemes,
comma-separated: `timestamp` (= `YYYYMMDD-HHMM-type-slug`), `type-slug`, or a regular expression
starting with `^` (a named group `type` is compared with the note's type).

`--fix` never changes a note's body (see `lint.fixes` for how each edit is proven safe).

Modules, in pipeline order: `rules` (the table above, `Finding`, the checks of one note), `formats`
(selection and output), `fixes` (`--fix`), `cache` (the on-disk vault index), `runner` (`lint_vault`,
`run_lint`). This package re-exports the names the CLI, the tests and the benchmarks use.
"""

from ..vault_paths import VAULT_MARKERS, find_vault_root, group_paths
from .cache import CACHE_PATH, IndexEntry, VaultIndex, refresh_index
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
    "CACHE_PATH",
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
