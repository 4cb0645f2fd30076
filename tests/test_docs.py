"""The front door stays a front door (issue 28): a short README, links that resolve, figures out of the code.

- README.md is read in five minutes: at most 250 lines.
- Every relative link in README.md and docs/ (guides and decision records) names a file that exists,
  and a `#fragment` names a heading of that file (GitHub's anchor rules).
- Measured figures live in docs/benchmarks.md and the decision records, not in `src/`: at most 10
  three-decimal numbers remain there, the ones the code uses (e.g. the e5 tier's gains).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
DOCS = sorted([README, *(ROOT / "docs").rglob("*.md")])
MAX_README_LINES = 250
MAX_SRC_FIGURES = 10

FIGURE = re.compile(r"\b[0-9]\.[0-9]{3}\b")
"""A three-decimal figure, as issue 28 counts them (`grep -rnoE "\\b[0-9]\\.[0-9]{3}\\b" src/mindnet`)."""
LINK = re.compile(r"(?<!!)\[[^\]\n]*\]\(([^)\s]+)\)")
FENCE = re.compile(r"^(```|~~~).*?^\1", re.S | re.M)
CODE_SPAN = re.compile(r"`[^`\n]*`")


def anchors(markdown: str) -> set[str]:
    """GitHub's heading anchors: lower case, punctuation dropped, spaces to hyphens."""
    found = set()
    for heading in re.findall(r"^#{1,6}\s+(.+?)\s*#*$", FENCE.sub("", markdown), re.M):
        text = re.sub(r"[`*]", "", heading).lower()  # rendered text: code and emphasis marks go
        found.add(re.sub(r"[^\w\- ]", "", text).replace(" ", "-"))
    return found


def links(path: Path) -> list[str]:
    text = CODE_SPAN.sub("", FENCE.sub("", path.read_text(encoding="utf-8")))
    return [t for t in LINK.findall(text) if not re.match(r"[a-z]+:", t)]


def test_the_readme_is_read_in_five_minutes() -> None:
    lines = README.read_text(encoding="utf-8").count("\n")
    assert lines <= MAX_README_LINES, f"README.md has {lines} lines; move detail into docs/"


@pytest.mark.parametrize("path", DOCS, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_resolves(path: Path) -> None:
    broken = []
    for target in links(path):
        file, _, fragment = target.partition("#")
        resolved = (path.parent / file).resolve() if file else path
        if not resolved.exists():
            broken.append(f"{target}: no {resolved.relative_to(ROOT) if resolved.is_relative_to(ROOT) else resolved}")
        elif fragment and resolved.suffix == ".md" and fragment not in anchors(resolved.read_text(encoding="utf-8")):
            broken.append(f"{target}: no heading #{fragment}")
    assert broken == []


def test_the_docs_hold_the_guides_and_decision_records() -> None:
    docs = {p.relative_to(ROOT / "docs").as_posix() for p in DOCS if p != README}
    assert {"benchmarks.md", "search.md", "mcp.md", "configuration.md", "decisions/encoder-engine.md",
            "decisions/e5-weights.md", "decisions/fusion-knobs.md", "decisions/search-representation.md"} <= docs
    readme = README.read_text(encoding="utf-8")
    assert all(f"docs/{name}" in readme for name in ("search.md", "mcp.md", "configuration.md", "benchmarks.md"))


def test_measured_figures_stay_out_of_the_code() -> None:
    found = [f"{path.relative_to(ROOT)}:{n}: {m}"
             for path in sorted((ROOT / "src" / "mindnet").rglob("*.py"))
             for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
             for m in FIGURE.findall(line)]
    assert len(found) <= MAX_SRC_FIGURES, "measured figures belong in docs/benchmarks.md:\n" + "\n".join(found)


def test_the_anchor_rule() -> None:
    assert anchors("## Search quality (issue 25)\n```\n# not\n```\n### `--explain`\n") == {
        "search-quality-issue-25", "--explain"}


def test_every_toml_example_is_a_valid_configuration(tmp_path: Path) -> None:
    from mindnet.config import load_settings

    blocks = [(path, block) for path in DOCS
              for block in re.findall(r"```toml\n(.*?)```", path.read_text(encoding="utf-8"), re.S)]
    assert blocks
    for n, (path, block) in enumerate(blocks):
        file = tmp_path / f"{path.stem}-{n}.toml"  # a ConfigError names the guide and the bad key
        file.write_text(block, encoding="utf-8")
        load_settings(config_file=file, env={})


def test_every_environment_variable_named_exists() -> None:
    from mindnet.config import env_names

    others = {"MINDNET_API_KEY", "MINDNET_DEBUG", "MINDNET_TEST_QDRANT_URL", "MINDNET_SCREENSHOTS"}
    named = {v for path in DOCS for v in re.findall(r"MINDNET_[A-Z_]+", path.read_text(encoding="utf-8"))}
    assert named - set(env_names()) - others == set()
    for variable in others - {"MINDNET_TEST_QDRANT_URL", "MINDNET_SCREENSHOTS"}:
        assert any(variable in p.read_text(encoding="utf-8") for p in (ROOT / "src").rglob("*.py")), variable


def test_every_document_the_code_names_exists() -> None:
    """Docstrings point at docs/benchmarks.md and the decision records for their figures: those must exist."""
    named = {(path.relative_to(ROOT).as_posix(), name)
             for path in sorted((ROOT / "src" / "mindnet").rglob("*.py"))
             for name in re.findall(r"docs/[\w/.-]+\.md", path.read_text(encoding="utf-8"))}
    assert named
    assert [f"{source}: {name}" for source, name in sorted(named) if not (ROOT / name).is_file()] == []


def test_every_setting_is_documented() -> None:
    """docs/configuration.md names every key a `mindnet.toml` may hold (derived fields excepted)."""
    import dataclasses

    from mindnet.config import RecursiveSettings, Settings

    guide = (ROOT / "docs" / "configuration.md").read_text(encoding="utf-8")
    derived = {"notices", "recursive_by_type", "strategy_by_type"}
    keys = {f.name for cls in (Settings, RecursiveSettings) for f in dataclasses.fields(cls)} - derived
    assert sorted(k for k in keys if f"`{k}" not in guide and f"[{k}" not in guide) == []


def test_every_mcp_tool_argument_is_documented() -> None:
    import inspect

    from mindnet.mcp.tools import tool_functions

    guide = (ROOT / "docs" / "mcp.md").read_text(encoding="utf-8")
    for tool in tool_functions(None):  # type: ignore[arg-type]
        assert f"### `{tool.__name__}`" in guide
        missing = [a for a in inspect.signature(tool).parameters if f"`{a}`" not in guide]
        assert missing == [], f"{tool.__name__}: {missing}"
