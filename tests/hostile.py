"""A generated hostile vault: every kind of bad file the README lists, the pathological notes of
issue 13, and a few good notes. Shared by `test_hostile.py` and `bench/hostile.py`.

Each bad file's expected fate is recorded: `skipped` files must be reported on one `error` line;
`imported` files are hostile in shape but legal, so they must land in the store like good notes.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

GOOD_NOTES = 20


def yaml_bomb(levels: int = 9, width: int = 9) -> str:
    """The "billion laughs" frontmatter: each level repeats the previous anchor `width` times."""
    names = "abcdefghijklmnopqrstuvwxyz"
    lines = [f"{names[0]}: &{names[0]} [{', '.join(['lol'] * width)}]"]
    for i in range(1, levels):
        refs = ", ".join([f"*{names[i - 1]}"] * width)
        lines.append(f"{names[i]}: &{names[i]} [{refs}]")
    return "---\n" + "\n".join(lines) + "\n---\nbody\n"


def deep_quotes(depth: int = 2000) -> str:
    return "# Deep quotes\n\n" + "> " * depth + "innermost words of a very nested quote\n"


def deep_lists(depth: int = 400) -> str:
    lines = [" " * (2 * i) + f"- item at level {i}" for i in range(depth)]
    return "# Deep lists\n\n" + "\n".join(lines) + "\n"


def long_line(size: int = 2 * 1024 * 1024) -> str:
    words = "lorem ipsum dolor sit amet consectetur adipiscing elit "
    return "# Long line\n\n" + (words * (size // len(words) + 1))[:size] + "\n"


def blank_lines(count: int = 200_000) -> str:
    return "# Blank lines\n\nfirst paragraph\n" + "\n" * count + "last paragraph\n"


def good_note(i: int) -> str:
    return (
        f"---\nid: good-{i:02d}\ntitle: Good note {i}\ntype: thought\ntags: [hostile]\n---\n"
        f"# Good note {i}\n\nThis note is fine and links to [[good-{(i + 1) % GOOD_NOTES:02d}]]. "
        "It talks about gardens, rivers and the weather in spring.\n"
    )


@dataclass
class HostileVault:
    root: Path
    good_ids: list[str] = field(default_factory=list)
    imported: dict[str, str] = field(default_factory=dict)
    """Hostile but legal files (path -> note id) that must be imported."""
    skipped: list[str] = field(default_factory=list)
    """Vault-relative paths that must be reported on an `error` line and skipped."""


def build(root: Path, max_file_bytes: int = 5 * 1024 * 1024) -> HostileVault:
    """Write the vault under `root` (created) and say what should become of each file."""
    root.mkdir(parents=True, exist_ok=True)
    vault = HostileVault(root)
    for i in range(GOOD_NOTES):
        (root / f"good-{i:02d}.md").write_text(good_note(i), encoding="utf-8")
        vault.good_ids.append(f"good-{i:02d}")
    bad: dict[str, bytes] = {
        "bomb.md": yaml_bomb().encode(),
        "malformed.md": b"---\ntitle: x\ntags: [a, b\n---\nbody\n",
        "invalid-utf8.md": b"# Title\n\nbad byte \xff here\n",
        "nul.md": b"# Title\n\x00\n",
        "empty.md": b"",
        "too-big.md": b"# Big\n\n" + b"word " * (max_file_bytes // 5 + 10),
        "zz-dup.md": b"---\nid: good-00\ntitle: Duplicate\n---\nsame id as good-00\n",
        "utf16-bom.md": "\ufeff# UTF-16 with BOM\n\nsome text\n".encode("utf-16-le"),
        "utf16.md": "# UTF-16 without BOM\n\nsome text\n".encode("utf-16-le"),
        "recursive-alias.md": b"---\na: &a [x, *a]\n---\nbody\n",
    }
    for name, data in bad.items():
        (root / name).write_bytes(data)
        vault.skipped.append(name)
    legal = {
        "deep-quotes.md": deep_quotes(),
        "deep-lists.md": deep_lists(),
        "long-line.md": long_line(),
        "blank-lines.md": blank_lines(),
    }
    for name, text in legal.items():
        (root / name).write_text(text, encoding="utf-8")
        vault.imported[name] = name[:-3]
    _symlinks(root, vault)
    return vault


def _symlinks(root: Path, vault: HostileVault) -> None:
    """A loop (`loop/again` -> `loop`) and a link leaving the vault."""
    loop = root / "loop"
    loop.mkdir()
    (loop / "inside.md").write_text("# Inside the loop\n\nA note inside a folder that links to itself.\n")
    vault.imported["loop/inside.md"] = "inside"
    os.symlink("..", loop / "again")
    vault.skipped.append("loop/again")
    os.symlink("selfloop.md", root / "selfloop.md")
    vault.skipped.append("selfloop.md")
    os.symlink("/", root / "outside")
    vault.skipped.append("outside")
