"""The public API: one import path, one owner of every open resource (issue 14)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

import mindnet
from fakes import FakeEmbedder
from mindnet import Index, IndexStatus, MindnetError, StoreError
from mindnet.quality_tier import LACKING_E5, UNFILLED_SHARE


@pytest.fixture
def vault(tmp_path: Path) -> Path:
    root = tmp_path / "vault"
    root.mkdir()
    (root / "a.md").write_text("# Alpha\n\nAlpha links to [[b]] about reciprocal rank fusion.\n", encoding="utf-8")
    (root / "b.md").write_text("# Beta\n\nBeta explains rank fusion and scores.\n", encoding="utf-8")
    return root


def test_every_public_name_resolves() -> None:
    for name in mindnet.__all__:
        assert getattr(mindnet, name) is not None, name
    with pytest.raises(AttributeError):
        _ = mindnet.no_such_name


def test_lint_names_load_without_qdrant_or_a_model() -> None:
    """`mindnet lint` is a pre-commit hook: its public names must not drag in the store or numpy models."""
    code = "import sys; from mindnet import run_lint, LINT_FORMATS; print('qdrant_edge' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"


def test_index_opens_each_resource_once_and_closes_them(vault: Path) -> None:
    model = FakeEmbedder()
    with Index(vault, embedder=model) as index:
        index.import_vault()
        store, embedder = index.store(), index.embedder
        index.import_vault()
        assert index.store() is store and index.embedder is embedder and embedder.inner is model
        assert [h.note_id for h in index.search("rank fusion scores", k=1, by_note=True)] == ["b"]
        status = index.status()
        assert isinstance(status, IndexStatus)
        assert (status.notes, status.model) == (2, "fake@1")
        assert set(status.as_dict()) == {"quality_tier", "notes", "chunks", "edges", "model", "dim", "vectors", "store",
                                         "written_by", "written_elsewhere", "quality_gain"}
    index.close()  # a second close is harmless
    with Index(vault, embedder=FakeEmbedder()) as again:  # everything was released: the store opens again
        assert again.status().notes == 2


def test_the_import_lock_is_held_only_while_writing(vault: Path) -> None:
    with Index(vault, embedder=FakeEmbedder()) as index:
        index.import_vault()
        assert not index._lock.held
        with index._writing():
            assert index._lock.held
            other = Index(vault, embedder=FakeEmbedder())
            with pytest.raises(StoreError, match="another import is running"):
                other.import_vault()
            other.close()
        assert not index._lock.held


def test_a_vault_that_was_never_imported_cannot_be_searched(vault: Path) -> None:
    with Index(vault, embedder=FakeEmbedder()) as index, pytest.raises(MindnetError, match="not imported yet"):
        index.search("anything")


def test_e5_is_filled_only_when_asked(vault: Path) -> None:
    e5 = FakeEmbedder(dim=16, model_id="fake-e5@1")
    with Index(vault, embedder=FakeEmbedder(), e5=e5) as index:
        assert index.import_vault(e5=False).chunks_embedded_e5 == 0
        assert e5.calls == 0
        filled = index.import_vault(e5=True).chunks_embedded_e5
        assert filled == e5.calls > 0
        assert "fake-e5@1" in index.status().quality_tier


def _fill_part_then_all(index: Index, query: str, k: int, batches: int) -> None:
    """Import without the tier, fill `batches` of it and stop: the hits and scores are those from before the
    fill; fill the rest: the e5 list takes part."""
    index.import_vault(e5=False)
    before = [(h.chunk_id, h.score, h.via) for h in index.search(query, k=k)]
    left = iter(range(batches))
    index.fill_e5(stop=lambda: next(left, None) is None, batch_seconds=0.001)  # the first batches, then stop
    lacking = index.store().count("chunks", LACKING_E5)
    assert lacking > index.store().count("chunks") * UNFILLED_SHARE and not index.e5_complete()
    assert [(h.chunk_id, h.score, h.via) for h in index.search(query, k=k)] == before
    index.fill_e5()
    assert index.e5_complete()
    assert any("e5" in h.via for h in index.search(query, k=k))


def test_a_tier_still_filling_is_not_fused_until_it_covers_the_chunks(tmp_path: Path) -> None:
    """While the e5 tier fills, its list holds only the chunks filled so far and would add its share to them
    alone: until it covers the store (`quality_tier.UNFILLED_SHARE`), a search ranks as it did without it."""
    root = tmp_path / "many"
    root.mkdir()
    topics = ["tea", "garden", "rust", "music", "sailing", "bread", "chess", "bees", "clocks", "maps", "ink", "salt"]
    for i, topic in enumerate(topics * 2):
        (root / f"n{i:02d}.md").write_text(f"# {topic} {i}\n\nNotes on {topic}, part {i}.\n\n## More\n\n"
                                           f"Everything else about {topic} and number {i}.\n", encoding="utf-8")
    with Index(root, embedder=FakeEmbedder(), e5=FakeEmbedder(dim=16, model_id="fake-e5@1")) as index:
        _fill_part_then_all(index, "everything about bees and bread", k=50, batches=3)


def test_a_small_vault_waits_for_every_chunk_of_its_tier(vault: Path) -> None:
    """On a small vault a few chunks are a large share: one filled chunk of two is not fused (no floor in chunks)."""
    with Index(vault, embedder=FakeEmbedder(), e5=FakeEmbedder(dim=16, model_id="fake-e5@1")) as index:
        _fill_part_then_all(index, "rank fusion scores", k=5, batches=1)


def test_read_counts_lines_as_the_sections_do_with_any_line_break(tmp_path: Path) -> None:
    """A note saved with lone CR line breaks: `read` cuts the same lines that `sections` number."""
    root = tmp_path / "cr"
    root.mkdir()
    (root / "c.md").write_bytes(b"# Cee\r\rFirst paragraph.\r\r## Two\r\rSecond paragraph here.\r")
    with Index(root, embedder=FakeEmbedder()) as index:
        index.import_vault()
        part = index.read("c", section="Two")
        assert part["text"] == "## Two\r\rSecond paragraph here."
        assert index.read("c", lines=(3, 3))["text"] == "First paragraph."
