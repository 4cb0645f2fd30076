"""Linting a vault, and what `mindnet lint` does with its command-line arguments.

`lint_vault` reads a vault the way an import does (`vault.read_note`, `links.Resolver` fed by the
cached vault index of `lint.cache`): link integrity is judged by exactly the resolver that builds
the graph, never a second one. `run_lint` groups the arguments by vault, lints, fixes, lints again.
"""

from __future__ import annotations

import dataclasses
import functools
import os
import re
import unicodedata
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from ..config import Settings
from ..errors import NoteError, VaultNotFoundError
from ..links import Resolver
from ..vault import (
    NoteProblem,
    assign_ids,  # the import's own duplicate-id rule (R3), not a copy
    note_file,
    read_note,
)
from ..vault_paths import group_paths
from .cache import IndexEntry, refresh_index
from .fixes import FixSummary, fix_notes
from .formats import is_selected, parse_codes
from .rules import (
    Finding,
    SkippedNotes,
    check_note,
    compile_id_scheme,
    duplicate_findings,
    new_finding,
    problem_finding,
    walk_finding,
)


@dataclass(frozen=True, slots=True)
class LintReport:
    """The findings of one lint run over one vault."""

    root: str
    findings: tuple[Finding, ...]
    files: int
    """How many files were linted."""
    strict: bool = False

    @property
    def errors(self) -> int:
        return sum(1 for f in self.findings if f.severity == "error")

    @property
    def warnings(self) -> int:
        return sum(1 for f in self.findings if f.severity == "warning")

    @property
    def exit_code(self) -> int:
        """1 on any error, or on any finding at all under `--strict`; else 0."""
        return 1 if self.errors or (self.strict and self.findings) else 0


def lint_vault(
    root: str | Path,
    settings: Settings,
    files: Iterable[str | Path] | None = None,
    select: Sequence[str] = (),
    ignore: Sequence[str] = (),
    *,
    use_cache: bool = True,
) -> LintReport:
    """Lint a whole vault, or some of its files against the whole vault.

    Args:
        root: the vault folder.
        settings: resolved settings; `strict` turns MN001 into an error, `id_scheme` and
            `tag_scheme` switch on MN030 and MN031.
        files: note files as given on a command line (absolute or relative to the working
            directory); None lints every note. Other files are ignored, so a pre-commit hook may
            pass anything staged.
        select: only report codes starting with one of these (all when empty).
        ignore: never report codes starting with one of these.
        use_cache: keep the vault index in the store folder's `lint-index.json` (`lint.cache.cache_file`).

    Raises:
        VaultNotFoundError: the vault folder does not exist.
        ConfigError: an unknown `id_scheme` or rule code.
    """
    root_path = Path(root)
    if not root_path.is_dir():
        raise VaultNotFoundError(str(root))
    schemes = compile_id_scheme(settings.id_scheme)
    select, ignore = parse_codes(select), parse_codes(ignore)
    # Lint needs neither strict reading (it reports missing fields itself) nor language detection.
    reading = dataclasses.replace(settings, strict=False, languages=settings.languages[:1] or ("en",))
    findings: list[Finding] = []
    wanted: list[str] | None = None
    if files is not None:
        wanted, outside = _vault_paths(root_path, files)
        findings.extend(outside)
    index = refresh_index(root_path, reading, use_cache=use_cache, keep=["*"] if wanted is None else wanted)
    stubs = [e.stub() for e in index.entries.values() if e.note_id is not None]
    kept, duplicates = assign_ids(stubs)
    resolver = Resolver(kept, index.attachments)
    skipped = _skipped_notes(index.entries, duplicates)
    assigned = {n.path: n.note_id for n in kept}
    if wanted is None:
        targets = list(index.entries)
        findings.extend(walk_finding(p) for p in index.walk_problems)
    else:
        targets = [rel for rel in dict.fromkeys(wanted) if rel in index.entries]
        findings.extend(m for rel in wanted if rel not in index.entries and (m := _missing_file(root_path, rel)))
    target_set = set(targets)
    findings.extend(duplicate_findings(duplicates, kept, index.entries, target_set))
    for rel in targets:
        entry = index.entries[rel]
        problem = entry.problem()
        note = None if problem else index.read.get(rel)
        if note is None and problem is None:
            try:
                note = read_note(root_path / rel, rel, reading)
            except NoteError as exc:
                problem = NoteProblem(exc.path, exc.line, exc.reason)
        if problem is not None:
            findings.append(problem_finding(problem))
            continue
        assert note is not None
        lines = functools.partial(_header_lines, note_file(root_path / rel))
        findings.extend(
            check_note(note, resolver, settings, assigned.get(rel, note.note_id), schemes, lines, skipped)
        )
    chosen = [f for f in findings if is_selected(f.code, select, ignore)]
    chosen.sort(key=lambda f: (f.path, f.line, f.col, f.code, f.message))
    return LintReport(str(root_path), tuple(chosen), len(targets), settings.strict)


def _skipped_notes(entries: Mapping[str, IndexEntry], duplicates: Iterable[NoteProblem]) -> SkippedNotes:
    """The files the import skips, findable by path and file name (their titles and aliases are
    not the import's: a broken frontmatter has none, a duplicate's id lost)."""
    problems = {p.path: p for p in duplicates}
    problems.update((path, p) for path, entry in entries.items() if (p := entry.problem()) is not None)
    stubs = [
        dataclasses.replace(entries[path], note_id=path, title="", aliases=(), id_explicit=False).stub()
        for path in problems
    ]
    return SkippedNotes(Resolver(stubs), problems)


def _vault_paths(root: Path, files: Iterable[str | Path]) -> tuple[list[str], list[Finding]]:
    """Vault-relative, NFC paths of command-line files (as `vault.discover` names them)."""
    real_root = root.resolve()
    abs_root = Path(os.path.abspath(root))
    rels: list[str] = []
    outside: list[Finding] = []
    for raw in files:
        path = Path(raw)
        rel: str | None = None
        for base, candidate in ((abs_root, Path(os.path.abspath(path))), (real_root, path.resolve())):
            try:
                rel = candidate.relative_to(base).as_posix()
                break
            except ValueError:
                continue
        if rel is None:
            if str(raw).lower().endswith(".md"):
                outside.append(new_finding(str(raw), 1, 1, "MN003", f"not inside the vault {root}; pass --vault"))
            continue
        rels.append(unicodedata.normalize("NFC", rel))
    return rels, outside


def _missing_file(root: Path, rel: str) -> Finding | None:
    """A command-line file the walk did not list: gone, or not a note (other type, ignored folder)."""
    if rel.lower().endswith(".md") and not (root / rel).exists():
        return new_finding(rel, 1, 1, "MN003", "no such file")
    return None


def _header_lines(path: Path) -> list[str]:
    """The file's first lines, to find the column of frontmatter keys (read_note succeeded, so it decodes)."""
    try:
        with path.open(encoding="utf-8", errors="replace", newline="") as fh:
            head = fh.read(65536)
    except OSError:
        return []
    return _LINE_SPLIT.split(head)


_LINE_SPLIT = re.compile(r"\r\n|\r|\n")


@dataclass(frozen=True, slots=True)
class LintRun:
    """Reports of every vault named on a command line, and what `--fix` changed."""

    reports: tuple[tuple[str, LintReport], ...]
    """(display prefix of the vault folder, report)."""
    fixes: tuple[FixSummary, ...] = ()

    @property
    def findings(self) -> list[Finding]:
        """All findings, paths shown relative to the working directory where the vault lies below it."""
        return [
            dataclasses.replace(f, path=prefix + f.path) for prefix, report in self.reports for f in report.findings
        ]

    @property
    def files(self) -> int:
        return sum(r.files for _, r in self.reports)

    @property
    def exit_code(self) -> int:
        return max((r.exit_code for _, r in self.reports), default=0)


def run_lint(
    paths: Sequence[Path],
    vault: Path | None,
    settings_for: Callable[[Path], Settings],
    select: Sequence[str] = (),
    ignore: Sequence[str] = (),
    *,
    fix: bool = False,
    use_cache: bool = True,
) -> LintRun:
    """What `mindnet lint` does: lint each vault named by the arguments, fix, lint again.

    Args:
        paths: vault folders or note files (default `.` when empty).
        vault: the vault that file arguments belong to; found from vault markers when None.
        settings_for: builds the settings of a vault folder (the CLI's four config layers).
        select: codes or prefixes to report; ignore: codes or prefixes to drop.
        fix: apply `fix_notes` to the fixable findings, then lint the same files again.
        use_cache: see `lint_vault`.
    """
    reports: list[tuple[str, LintReport]] = []
    fixes: list[FixSummary] = []
    for root, files in group_paths(list(paths) or [Path(".")], vault).items():
        settings = settings_for(root)
        report = lint_vault(root, settings, files, select, ignore, use_cache=use_cache)
        if fix:
            summary = fix_notes(root, report.findings)
            fixes.append(summary)
            if summary.changed:
                report = lint_vault(root, settings, files, select, ignore, use_cache=use_cache)
        reports.append((_display_prefix(root), report))
    return LintRun(tuple(reports), tuple(fixes))


def _display_prefix(root: Path) -> str:
    """How the vault folder is shown before vault paths: relative below the working directory, else absolute."""
    absolute = Path(os.path.abspath(root))
    try:
        rel = absolute.relative_to(Path.cwd()).as_posix()
    except ValueError:
        return absolute.as_posix().rstrip("/") + "/"
    return "" if rel == "." else rel + "/"
