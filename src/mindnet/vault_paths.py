"""Which vault a command-line path belongs to: one grouping of arguments for `mindnet lint` and `mindnet-chunk`.

Both commands take folders and note files in any mix. A folder is a vault of its own (all its
notes); a file belongs to `--vault` when given, else to a vault found from the file itself. The
two commands differ on purpose in two points, which `group_paths` takes as parameters:

- where a file's vault is without `--vault`: lint looks up the nearest folder holding a vault
  marker (`find_vault_root`), so `mindnet lint notes/a.md` from a repository root resolves links
  against the whole vault; `mindnet-chunk` uses the file's own folder, as it always has;
- a missing `.md` file: lint accepts it (a pre-commit hook may pass a note the commit deletes, and
  lint reports it as a finding), `mindnet-chunk` has nothing to read and refuses it.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TypeVar

from .errors import MindnetError, VaultNotFoundError

VAULT_MARKERS = ("mindnet.toml", ".obsidian", ".mindnet")
"""A folder holding one of these is a vault root, for file arguments given without `--vault`."""

PathArg = TypeVar("PathArg", str, Path)
"""An argument as given: returned unchanged, so messages show it as the user typed it."""


def find_vault_root(path: Path, default: Path | None = None) -> Path:
    """The nearest folder above `path` that holds a vault marker, else `default` (the working directory)."""
    for folder in Path(os.path.abspath(path)).parents:
        if any((folder / marker).exists() for marker in VAULT_MARKERS):
            return folder
    return default or Path.cwd()


def group_paths(
    paths: Iterable[PathArg],
    vault: Path | None,
    *,
    root_of: Callable[[Path], Path] = find_vault_root,
    allow_missing_notes: bool = True,
) -> dict[Path, list[PathArg] | None]:
    """Command-line arguments by vault: a folder is a vault of its own (None: all its notes); files go
    to `vault` or to `root_of(file)`.

    Args:
        paths: folders and files, in command-line order (kept within each vault).
        vault: the `--vault` option: the vault of every file argument when given.
        root_of: the vault of a file without `--vault`; lint's nearest marker folder by default,
            `mindnet-chunk` passes the file's own folder.
        allow_missing_notes: accept a missing `.md` file (lint reports a deleted note itself);
            False refuses every argument that does not exist.

    Raises:
        VaultNotFoundError: a missing argument without a file suffix (a mistyped vault folder).
        MindnetError: any other argument that does not exist (and is no Markdown file, when missing
            notes are allowed: a typo, not a deleted note).
    """
    groups: dict[Path, list[PathArg] | None] = {}
    for raw in paths:
        path = Path(raw)
        if path.is_dir():
            groups[path] = None
            continue
        if not path.exists() and not (allow_missing_notes and path.name.lower().endswith(".md")):
            if not path.suffix:  # a name like a folder's: a mistyped vault
                raise VaultNotFoundError(str(raw))
            raise MindnetError(f"{raw}: no such file or folder")
        root = vault if vault is not None else root_of(path)
        existing = groups.setdefault(root, [])
        if existing is not None:
            existing.append(raw)
    return groups
