"""`mindnet lint` (R27): gold findings per rule, strictness, selection, the vault-index cache, `--fix`, the CLI."""

from __future__ import annotations

import json
import os
import re
import shutil
from collections import Counter
from pathlib import Path

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from conftest import corpus
from mindnet import file_stat, lint
from mindnet import frontmatter as fm
from mindnet.cli import app
from mindnet.config import Settings, load_settings
from mindnet.errors import ConfigError
from mindnet.graph import build_edges
from mindnet.links import Resolver
from mindnet.lint import cache as lint_cache
from mindnet.vault import read_vault

FIXTURE = Path(__file__).parent / "fixtures" / "lint_vault"
REPO = Path(__file__).resolve().parents[1]
OLD_MTIME = 1_700_000_000

GOLD = [
    ("Odd Name.md", 1, 1, "MN030"),
    ("concept-ambiguous.md", 9, 12, "MN011"),
    ("concept-attachment.md", 9, 19, "MN012"),
    ("concept-bad-yaml.md", 5, 1, "MN002"),
    ("concept-bom.md", 1, 1, "MN007"),
    ("concept-dup-one.md", 3, 1, "MN020"),
    ("concept-dup-two.md", 3, 1, "MN020"),
    ("concept-empty.md", 1, 1, "MN004"),
    ("concept-hash-tags.md", 7, 1, "MN032"),
    ("concept-latin1.md", 9, 4, "MN003"),
    ("concept-missing-fields.md", 1, 1, "MN001"),
    ("concept-off-scheme-tag.md", 7, 1, "MN031"),
    ("concept-repaired.md", 5, 1, "MN006"),
    ("concept-skipped-link.md", 8, 1, "MN013"),
    ("concept-skipped-link.md", 12, 44, "MN013"),
    ("concept-skipped-link.md", 12, 69, "MN013"),
    ("concept-unresolved.md", 8, 1, "MN010"),
    ("concept-unresolved.md", 12, 5, "MN010"),
    ("concept-unresolved.md", 13, 3, "MN010"),
    ("linked-out.md", 1, 1, "MN005"),
    ("note-no-frontmatter.md", 1, 1, "MN001"),
    ("thought-wrong-type.md", 1, 1, "MN030"),
    ("thought-wrong-type.md", 3, 1, "MN030"),
]
"""Every finding of the fixture vault: one note (or pair) per rule, plus the clean notes that must stay silent."""


@pytest.fixture()
def vault(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A copy of the fixture vault (lint writes its cache into the vault) plus a symlink leaving it."""
    monkeypatch.setattr(file_stat, "RACY_SECONDS", 0.0)  # the fresh copies (new ctime) would not be cached
    root = tmp_path / "vault"
    shutil.copytree(FIXTURE, root)
    (tmp_path / "outside.md").write_text("# Outside\n", encoding="utf-8")
    (root / "linked-out.md").symlink_to(tmp_path / "outside.md")
    for path in root.rglob("*"):
        if not path.is_symlink():
            os.utime(path, (OLD_MTIME, OLD_MTIME))  # files of a vault that has been around
    return root


def run(root: Path, **kw: object) -> lint.LintReport:
    settings = kw.pop("settings", None) or load_settings(root)
    return lint.lint_vault(root, settings, **kw)  # type: ignore[arg-type]


def positions(report: lint.LintReport) -> list[tuple[str, int, int, str]]:
    return [(f.path, f.line, f.col, f.code) for f in report.findings]


# ---------------------------------------------------------------------------------------------
# Gold findings.


def test_fixture_vault_gives_exactly_the_gold_findings(vault: Path) -> None:
    report = run(vault)
    assert positions(report) == GOLD
    assert report.exit_code == 1
    for f in report.findings:
        assert f.severity == lint.RULES[f.code].severity


def test_gold_messages_name_the_problem(vault: Path) -> None:
    by_key = {(f.path, f.line, f.code): f.message for f in run(vault).findings}
    assert by_key[("concept-ambiguous.md", 9, "MN011")] == (
        "ambiguous link [[concept-same]]: resolves to a/concept-same.md, also matches b/concept-same.md; write the path"
    )
    assert by_key[("concept-dup-two.md", 3, "MN020")].startswith("duplicate id 'concept-dup': already used by")
    assert by_key[("concept-missing-fields.md", 1, "MN001")] == (
        "missing required fields status, created (defaults: created=the file's mtime)"
    )
    assert by_key[("concept-unresolved.md", 8, "MN010")].startswith("unresolved link [[concept-ghost]] in 'related'")
    assert by_key[("thought-wrong-type.md", 3, "MN030")].endswith(
        "type segment 'thought' is not the note's type 'concept'"
    )
    assert by_key[("concept-hash-tags.md", 7, "MN032")] == "tags are not normalised; write [topic/lint]"


def test_a_link_to_a_skipped_note_names_the_file_not_a_missing_name(vault: Path) -> None:
    """Issue 28: `[[concept-bad-yaml]]` exists and was only skipped for its YAML; lint says so
    (the file and the line of its problem), never "no note has this name"."""
    found = {(f.line, f.col): f for f in run(vault, files=[vault / "concept-skipped-link.md"]).findings}
    assert {f.code for f in found.values()} == {"MN013"}
    assert found[(12, 44)].message == (
        "link [[concept-bad-yaml]] names concept-bad-yaml.md, which the import skips "
        "(concept-bad-yaml.md:5: malformed YAML frontmatter: did not find expected ',' or ']'); fix that note"
    )
    assert found[(8, 1)].message.startswith("link [[concept-bad-yaml]] in 'related' names concept-bad-yaml.md")
    assert "(concept-dup-two.md:3: duplicate id 'concept-dup'" in found[(12, 69)].message
    assert not any("no note has this name" in f.message for f in found.values())


def test_rule_table_documents_every_code() -> None:
    guide = (Path(__file__).resolve().parents[1] / "docs" / "lint.md").read_text(encoding="utf-8")
    documented = re.findall(r"^\| (MN\d{3}) \|", guide, re.M)
    assert documented == list(lint.RULES)
    assert {code for *_, code in GOLD} == set(lint.RULES) - {"MN009"}  # MN009 is the catch-all


def test_schemes_are_off_without_config(vault: Path) -> None:
    (vault / "mindnet.toml").unlink()
    codes = {f.code for f in run(vault).findings}
    assert not codes & {"MN030", "MN031"}
    assert "MN032" in codes  # normalisation is no scheme


def test_strict_makes_missing_fields_errors_and_any_finding_fail(tmp_path: Path) -> None:
    (tmp_path / "a.md").write_text("# A\n\nSee [[nowhere]].\n", encoding="utf-8")
    plain = run(tmp_path, use_cache=False)
    assert {f.severity for f in plain.findings} == {"warning"}
    assert plain.exit_code == 0
    strict = run(tmp_path, settings=Settings(strict=True), use_cache=False)
    assert [(f.code, f.severity) for f in strict.findings] == [("MN001", "error"), ("MN010", "warning")]
    assert strict.exit_code == 1


def test_select_and_ignore_take_codes_and_prefixes(vault: Path) -> None:
    assert {f.code for f in run(vault, select=["MN01"]).findings} == {"MN010", "MN011", "MN012", "MN013"}
    assert {f.code for f in run(vault, select=["mn010,MN020"]).findings} == {"MN010", "MN020"}
    assert "MN001" not in {f.code for f in run(vault, ignore=["MN001"]).findings}
    with pytest.raises(ConfigError, match="unknown rule code 'MN999'"):
        run(vault, select=["MN999"])


def test_id_scheme_values() -> None:
    schemes = lint.compile_id_scheme("timestamp,type-slug")
    assert lint.scheme_problem("20240105-1030-thought-gamma", "thought", schemes) is None
    assert lint.scheme_problem("concept-größe", None, schemes) is None
    assert "not a valid date" in (lint.scheme_problem("20241305-1030-thought-x", None, schemes) or "")
    assert lint.scheme_problem("Concept-Upper", None, schemes) is not None
    assert lint.compile_id_scheme(None) == ()
    custom = lint.compile_id_scheme(r"^(?P<type>[a-z]+)_\d+$")
    assert lint.scheme_problem("task_12", "task", custom) is None
    with pytest.raises(ConfigError, match="unknown scheme"):
        lint.compile_id_scheme("dates")


# ---------------------------------------------------------------------------------------------
# Link integrity is the graph's resolver.


@pytest.mark.parametrize(
    "where", ["examples", "foam"]
)
def test_unresolved_links_are_the_graphs_unresolved_edges(where: str) -> None:
    root = REPO / "examples" / "vault" if where == "examples" else corpus("foam-docs/vault")
    settings = Settings(note_references=True)
    result = read_vault(root, settings)
    edges = build_edges(result.notes, {}, Resolver(result.notes, result.attachments), settings)
    path_of = {n.note_id: n.path for n in result.notes}
    from_graph = {(path_of[e.note_id], raw) for e in edges if e.status == "unresolved" for raw in e.raw_links}
    report = lint.lint_vault(root, settings, select=["MN010", "MN013"], use_cache=False)
    from_lint = {
        (f.path, re.sub(r"^(?:unresolved )?link ", "", f.message).split(": no note")[0].split(" names ")[0]
         .split(" in '")[0])
        for f in report.findings
    }
    assert from_lint == from_graph


# ---------------------------------------------------------------------------------------------
# Staged files against the whole vault, and the index cache.


def test_single_file_resolves_against_the_whole_vault(vault: Path) -> None:
    report = run(vault, files=[vault / "concept-alpha.md", vault / "concept-unresolved.md"])
    assert report.files == 2
    assert positions(report) == [p for p in GOLD if p[0] == "concept-unresolved.md"]


def test_single_file_lint_reports_the_duplicate_it_keeps(vault: Path) -> None:
    report = run(vault, files=[vault / "concept-dup-one.md"])
    assert positions(report) == [("concept-dup-one.md", 3, 1, "MN020")]


def test_warm_cache_reads_only_the_linted_file(vault: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    run(vault)
    assert lint_cache.cache_file(vault, Settings()).is_file()
    reads: list[str] = []
    real = lint_cache.read_note

    def counting(path: Path, rel: str, settings: Settings) -> object:
        reads.append(rel)
        return real(path, rel, settings)

    monkeypatch.setattr(lint_cache, "read_note", counting)
    monkeypatch.setattr(lint.runner, "read_note", counting)
    report = run(vault, files=[vault / "concept-ambiguous.md"])
    assert positions(report) == [("concept-ambiguous.md", 9, 12, "MN011")]
    assert reads == ["concept-ambiguous.md"]


def test_cache_notices_new_changed_and_deleted_notes(vault: Path) -> None:
    run(vault)
    unresolved = vault / "concept-unresolved.md"
    (vault / "concept-nowhere.md").write_text(
        "---\ntitle: Nowhere\nid: concept-nowhere\ntype: concept\nstatus: draft\ncreated: 2024-01-05\n"
        "tags: [topic/lint]\n---\nNow it exists.\n",
        encoding="utf-8",
    )
    lines = [(f.line, f.code) for f in run(vault, files=[unresolved]).findings]
    assert lines == [(8, "MN010"), (13, "MN010")]
    two = vault / "concept-dup-two.md"
    two.write_text(
        two.read_text(encoding="utf-8").replace("id: concept-dup\n", "id: concept-dup-2\n"), encoding="utf-8"
    )
    assert run(vault, files=[vault / "concept-dup-one.md"]).findings == ()
    (vault / "b" / "concept-same.md").unlink()
    assert run(vault, files=[vault / "concept-ambiguous.md"]).findings == ()


def test_cache_sees_a_same_size_edit_that_restores_the_mtime(vault: Path) -> None:
    """mtime and size alone would trust the stale entry; the ctime (and inode) in the key give it away."""
    assert positions(run(vault, files=[vault / "concept-dup-one.md"])) == [("concept-dup-one.md", 3, 1, "MN020")]
    two = vault / "concept-dup-two.md"
    text = two.read_text(encoding="utf-8")
    two.write_text(text.replace("id: concept-dup\n", "id: concept-dux\n"), encoding="utf-8")
    os.utime(two, (OLD_MTIME, OLD_MTIME))  # as `touch -r` or a sync tool would leave it
    assert two.stat().st_size == len(text.encode("utf-8"))
    assert run(vault, files=[vault / "concept-dup-one.md"]).findings == ()


def test_cache_keeps_no_recently_changed_file(vault: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(file_stat, "RACY_SECONDS", 3600.0)  # every file counts as just written
    assert positions(run(vault)) == GOLD
    assert json.loads(lint_cache.cache_file(vault, Settings()).read_text(encoding="utf-8"))["files"] == {}


def test_corrupt_cache_is_rebuilt(vault: Path) -> None:
    (vault / ".mindnet").mkdir()
    lint_cache.cache_file(vault, Settings()).write_text("{not json", encoding="utf-8")
    assert positions(run(vault)) == GOLD
    assert json.loads(lint_cache.cache_file(vault, Settings()).read_text(encoding="utf-8"))["key"].startswith("2:")


def test_files_outside_or_missing_are_reported_and_other_types_ignored(vault: Path, tmp_path: Path) -> None:
    report = run(vault, files=[vault / "gone.md", tmp_path / "outside.md", vault / "attachments" / "photo.png"])
    assert [(f.path, f.code) for f in report.findings] == [
        (str(tmp_path / "outside.md"), "MN003"),
        ("gone.md", "MN003"),
    ]


# ---------------------------------------------------------------------------------------------
# --fix.


def _body(raw: bytes) -> bytes:
    text = raw.decode("utf-8").removeprefix("\ufeff")
    return text[fm.split(text).body_offset :].encode("utf-8")


@pytest.mark.parametrize("eol", ["\n", "\r\n"], ids=["lf", "crlf"])
def test_fix_fills_defaults_and_normalises_tags_without_touching_the_body(tmp_path: Path, eol: str) -> None:
    notes = {
        "plain.md": "# Plain Title\n\nBody with [[plain]] and trailing spaces  \n\n\n",
        "partial.md": "---\n# keep this comment\ntype: concept   # and this one\nid:\ntags:\n  - '#x'\n  - x\n"
        "  - two words\nstatus: draft\n---\n\n---\nA body that starts with a rule.\n",
        "bom.md": "\ufeff---\ntitle: Has BOM\n---\nBody.",
    }
    for rel, text in notes.items():
        (tmp_path / rel).write_bytes(text.replace("\n", eol).encode("utf-8"))
    before = {rel: (tmp_path / rel).read_bytes() for rel in notes}
    report = lint.lint_vault(tmp_path, Settings(), use_cache=False)
    summary = lint.fix_notes(tmp_path, report.findings)
    assert summary.changed == ("bom.md", "partial.md", "plain.md")
    assert summary.skipped == ()
    for rel in notes:
        after = (tmp_path / rel).read_bytes()
        assert _body(after) == _body(before[rel]), rel
        assert eol.encode() in after
        if eol == "\r\n":
            assert b"\n" not in after.replace(b"\r\n", b"")
    partial = (tmp_path / "partial.md").read_bytes().decode("utf-8").replace("\r\n", "\n")
    assert partial.startswith(
        "---\n# keep this comment\ntype: concept   # and this one\nid: partial\ntags:\n  - x\n  - two-words\n"
        "status: draft\ntitle: partial\ncreated: "
    )
    plain = yaml.safe_load((tmp_path / "plain.md").read_bytes().decode("utf-8").split("---")[1])
    assert (plain["title"], plain["id"]) == ("Plain Title", "plain")
    assert (tmp_path / "bom.md").read_bytes().startswith(b"\xef\xbb\xbf---")
    again = lint.lint_vault(tmp_path, Settings(), use_cache=False)
    assert not [f for f in again.findings if f.fix]
    assert lint.fix_notes(tmp_path, again.findings).changed == ()


def test_fix_leaves_unsafe_frontmatter_alone(tmp_path: Path) -> None:
    text = "---\n{type: concept, status: draft}\n---\nBody.\n"
    (tmp_path / "flow.md").write_text(text, encoding="utf-8")
    report = lint.lint_vault(tmp_path, Settings(), use_cache=False)
    summary = lint.fix_notes(tmp_path, report.findings)
    assert summary.changed == ()
    assert summary.skipped and summary.skipped[0].startswith("flow.md: ")
    assert (tmp_path / "flow.md").read_text(encoding="utf-8") == text


def test_fix_quotes_values_that_yaml_would_retype() -> None:
    fixed = lint.fix_text("Body\n", {"title": "no", "id": "0012", "created": "a: b #c"})
    parsed = fm.parse(fm.split(fixed).yaml_text or "", "x").data
    assert parsed == {"title": "no", "id": "0012", "created": "a: b #c"}


_LINES = st.lists(
    st.sampled_from(["---", "# Title", "tags: [a]", "id: x", "", "  - item", "text [[link]]", "```", "...", "é ü"]),
    max_size=8,
)


@settings(max_examples=200, deadline=None)
@given(head=_LINES, body=_LINES, eol=st.sampled_from(["\n", "\r\n", "\r"]), bom=st.booleans())
def test_fix_never_changes_the_body(head: list[str], body: list[str], eol: str, bom: bool) -> None:
    """Property: whatever the file looks like, a fix either keeps the body byte-for-byte or refuses."""
    text = ("\ufeff" if bom else "") + (eol.join(["---", *head, "---", *body]) if head else eol.join(body))
    if not text.strip("\ufeff").strip():
        return
    try:
        fixed = lint.fix_text(text, {"id": "note-x", "title": "A: b", "tags": ("a", "b")})
    except lint.FixError:
        return
    old = fm.split(text.removeprefix("\ufeff")).body  # the whole text when there is no frontmatter
    assert fm.split(fixed.removeprefix("\ufeff")).body == old
    assert fixed.startswith("\ufeff") == bom


# ---------------------------------------------------------------------------------------------
# Output formats and the command.


def test_formats() -> None:
    f = lint.Finding("a b/c.md", 3, 7, "MN010", "warning", "unresolved link [[x]]: 100%, really")
    assert lint.format_findings([f], "text") == "a b/c.md:3:7: MN010 unresolved link [[x]]: 100%, really\n"
    assert json.loads(lint.format_findings([f], "json")) == [
        {
            "path": "a b/c.md",
            "line": 3,
            "col": 7,
            "code": "MN010",
            "severity": "warning",
            "message": "unresolved link [[x]]: 100%, really",
        }
    ]
    assert lint.format_findings([f], "github") == (
        "::warning file=a b/c.md,line=3,col=7,title=MN010::unresolved link [[x]]: 100%25, really\n"
    )
    with pytest.raises(ConfigError):
        lint.format_findings([f], "xml")


def test_cli_json_and_exit_codes(vault: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(vault)
    runner = CliRunner()
    result = runner.invoke(app, ["lint", "--format", "json"])
    assert result.exit_code == 1
    rows = json.loads(result.stdout)
    assert [(r["path"], r["line"], r["col"], r["code"]) for r in rows] == GOLD
    assert set(rows[0]) == {"path", "line", "col", "code", "severity", "message"}
    clean = runner.invoke(app, ["lint", "concept-alpha.md", "concept-beta.md"])
    assert clean.exit_code == 0, clean.output
    assert clean.stdout == ""
    warn = runner.invoke(app, ["lint", "concept-unresolved.md", "--format", "github"])
    assert warn.exit_code == 0
    assert warn.stdout.startswith("::warning file=concept-unresolved.md,line=8,col=1,title=MN010::")
    strict = runner.invoke(app, ["lint", "concept-unresolved.md", "--strict"])
    assert strict.exit_code == 1
    assert strict.stdout.splitlines()[0].startswith("concept-unresolved.md:8:1: MN010 unresolved link")


def test_cli_paths_are_shown_from_the_working_directory(vault: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(vault.parent)
    result = CliRunner().invoke(app, ["lint", "vault/concept-ambiguous.md", "--vault", "vault"])
    assert result.stdout == (
        "vault/concept-ambiguous.md:9:12: MN011 ambiguous link [[concept-same]]: resolves to a/concept-same.md, "
        "also matches b/concept-same.md; write the path\n"
    )
    found = CliRunner().invoke(app, ["lint", "vault/concept-ambiguous.md"])  # mindnet.toml marks the vault
    assert found.stdout == result.stdout


def test_cli_fix(vault: Path) -> None:
    result = CliRunner().invoke(app, ["lint", str(vault), "--fix", "--select", "MN001,MN032"])
    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines() == [
        f"{lint._display_prefix(vault)}concept-missing-fields.md:1:1: MN001 missing required field status",
        f"{lint._display_prefix(vault)}note-no-frontmatter.md:1:1: MN001 missing required fields type, status, tags "
        "(defaults: type='note', tags=[])",
    ]


def test_pre_commit_hooks_file() -> None:
    hooks = yaml.safe_load((REPO / ".pre-commit-hooks.yaml").read_text(encoding="utf-8"))
    by_id = {h["id"]: h for h in hooks}
    assert by_id["mindnet-lint"]["entry"] == "mindnet lint"
    assert by_id["mindnet-lint"]["language"] == "python"
    assert by_id["mindnet-lint"]["types"] == ["markdown"]
    assert "--strict" in by_id["mindnet-lint-strict"]["entry"]


# ---------------------------------------------------------------------------------------------
# Real vaults.

FOAM_COUNTS = {"MN001": 86, "MN010": 4, "MN012": 22}


@pytest.mark.slow
@pytest.mark.parametrize(
    "folder",
    ["foam-docs/vault", "rustbook-de/src", "xquad/vault", "msdocs-skype-teams-de/docs"],
    ids=lambda folder: folder.split("/")[0],
)
def test_corpora_lint_without_exceptions(folder: str) -> None:
    root = corpus(folder)
    report = lint.lint_vault(root, load_settings(root), use_cache=False)  # never write into the shared corpora
    assert report.findings
    assert report.files == len(list(root.rglob("*.md")))
    if root.parent.name == "foam-docs":
        assert dict(Counter(f.code for f in report.findings)) == FOAM_COUNTS
