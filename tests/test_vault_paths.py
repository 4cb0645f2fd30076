"""Command-line paths by vault: the one grouping `mindnet lint` and `mindnet-chunk` share, in both of its modes."""

from __future__ import annotations

from pathlib import Path

import pytest

from mindnet.errors import MindnetError
from mindnet.vault_paths import find_vault_root, group_paths


@pytest.fixture()
def tree(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """`vault/` (marked by mindnet.toml) with `sub/a.md`, and a loose `other/b.md`; the working directory is tmp."""
    (tmp_path / "vault" / "sub").mkdir(parents=True)
    (tmp_path / "vault" / "mindnet.toml").write_text("", encoding="utf-8")
    (tmp_path / "vault" / "sub" / "a.md").write_text("# A\n", encoding="utf-8")
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "b.md").write_text("# B\n", encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    return tmp_path


def test_lint_mode_finds_the_marked_vault_and_accepts_deleted_notes(tree: Path) -> None:
    groups = group_paths([Path("vault/sub/a.md"), Path("vault/gone.md"), Path("other/b.md")], None)
    assert groups == {tree / "vault": [Path("vault/sub/a.md"), Path("vault/gone.md")], tree: [Path("other/b.md")]}
    with pytest.raises(MindnetError, match=r"^vault/typo\.txt: no such file or folder$"):
        group_paths([Path("vault/typo.txt")], None)


def test_chunk_mode_uses_the_files_own_folder_and_refuses_missing_files(tree: Path) -> None:
    def chunk_groups(paths: list[str]) -> dict[Path, list[str] | None]:
        return group_paths(paths, None, root_of=lambda path: path.parent, allow_missing_notes=False)

    groups = chunk_groups(["./vault/sub/a.md", "other/b.md"])
    assert groups == {Path("vault/sub"): ["./vault/sub/a.md"], Path("other"): ["other/b.md"]}  # as typed
    with pytest.raises(MindnetError, match=r"^vault/gone\.md: no such file or folder$"):
        chunk_groups(["vault/gone.md"])


def test_folders_are_vaults_and_take_in_their_files(tree: Path) -> None:
    vault = Path("vault")
    assert group_paths([vault, Path("vault/sub/a.md")], vault) == {vault: None}
    assert group_paths([Path("vault/sub/a.md"), vault], vault) == {vault: None}
    assert group_paths([Path("other/b.md")], vault) == {vault: [Path("other/b.md")]}  # --vault wins
    assert find_vault_root(Path("other/b.md"), default=Path("fallback")) == Path("fallback")
