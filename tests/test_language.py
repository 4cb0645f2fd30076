"""Language detection (R6): the unpacked model copy, the cache folder setting, and mixed notes."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mindnet import language
from mindnet.config import Settings, default_cache_dir, load_settings
from mindnet.language import chunk_languages, detect_language


def test_unpacked_language_model_matches_packaged(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from py3langid.langid import MODEL_FILE, LanguageIdentifier

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    fast = language._langid_model(Path(default_cache_dir()))
    (copy,) = (tmp_path / "cache" / "mindnet").iterdir()  # one unpacked copy, no temporary left behind
    assert copy.name.startswith("langid-") and (copy / "arrays.npz").is_file()
    packaged = LanguageIdentifier.from_model_file(MODEL_FILE, norm_probs=True)
    for model in (fast, packaged):
        model.set_languages(["de", "en", "fr"])
    texts = ["Die Notizen werden importiert.", "Notes are imported every night.", "Les notes sont importées.",
             "Teams Meeting Richtlinien", "Qdrant"]
    assert [fast.classify(t) for t in texts] == [packaged.classify(t) for t in texts]


def test_language_model_without_a_writable_cache_still_loads(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a folder", encoding="utf-8")
    monkeypatch.setenv("XDG_CACHE_HOME", str(blocker))
    model = language._langid_model(Path(default_cache_dir()))
    model.set_languages(["de", "en"])
    assert model.classify("Die Notizen werden importiert.")[0] == "de"


def test_a_damaged_unpacked_language_model_falls_back_to_the_packaged_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    language._langid_model(Path(default_cache_dir()))
    (copy,) = (tmp_path / "mindnet").iterdir()
    table = next(copy.glob("nextmove.*"))
    table.write_bytes(table.read_bytes()[:1000])  # cut short, as a full disk would leave it
    model = language._langid_model(Path(default_cache_dir()))
    model.set_languages(["de", "en"])
    assert model.classify("Die Notizen werden jede Nacht importiert.")[0] == "de"
    assert len(model.tk_nextmove) > 1000


def test_cache_folder_comes_from_settings_with_xdg_as_default(tmp_path: Path) -> None:
    xdg = tmp_path / "xdg"
    assert load_settings(env={"XDG_CACHE_HOME": str(xdg)}).cache_dir == str(xdg / "mindnet")
    own = tmp_path / "own"
    env = {"XDG_CACHE_HOME": str(xdg), "MINDNET_CACHE_DIR": str(own)}
    assert load_settings(env=env).cache_dir == str(own)


def test_detection_writes_its_model_copy_only_into_the_folder_given(tmp_path: Path) -> None:
    folder = tmp_path / "models"
    language.language_identifier.cache_clear()
    assert detect_language("Die Notizen werden jede Nacht importiert.", ("de", "en"), cache_dir=folder) == "de"
    assert [p.name.split("-")[0] for p in folder.iterdir()] == ["langid"]


GERMAN = "Die Notizen werden jede Nacht importiert, und der Index wird danach neu aufgebaut und geprüft. " * 2
ENGLISH = "Notes are imported every night, and the index is rebuilt and checked right after that run. " * 2


def _counting(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    seen: list[str] = []
    original = language.detect_language

    def counting(text: str, languages: tuple[str, ...], max_chars: int = 20_000, cache_dir: object = None) -> str:
        seen.append(text)
        return original(text, languages, max_chars)

    monkeypatch.setattr(language, "detect_language", counting)
    return seen


def test_a_note_in_one_language_is_probed_not_classified_chunk_by_chunk(monkeypatch: pytest.MonkeyPatch) -> None:
    seen = _counting(monkeypatch)
    texts = [GERMAN] * 9 + ["kurz"]
    assert chunk_languages(texts, "de", ("de", "en")) == ["de"] * 10
    assert len(seen) == language.PROBES


def test_a_mixed_note_has_each_long_chunk_classified(monkeypatch: pytest.MonkeyPatch) -> None:
    seen = _counting(monkeypatch)
    texts = [GERMAN, GERMAN, GERMAN, ENGLISH, GERMAN, "short english text", ENGLISH]
    assert chunk_languages(texts, "de", ("de", "en")) == ["de", "de", "de", "en", "de", "de", "en"]
    assert len(seen) == 6  # every chunk of 80 characters or more, each once


def test_a_language_outside_the_settings_is_inherited_without_detection(monkeypatch: pytest.MonkeyPatch) -> None:
    seen = _counting(monkeypatch)
    assert chunk_languages([ENGLISH, ENGLISH], "fr", Settings().languages) == ["fr", "fr"]
    assert seen == []


def _unpacked(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> object:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    return language._langid_model(Path(default_cache_dir()))


def test_the_unpacked_copy_walks_its_dfa_vectorised(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    model: Any = _unpacked(tmp_path, monkeypatch)
    assert model.walk is not None and 1 <= model.walk.memory <= 12


_TEXTS = st.text(
    alphabet=st.sampled_from([*"aeinrst EINRSTäöüßÄ.,;:-_#*[]()`\n\t0123456789", "\u00a0", "é", "ñ", "日", "😀"]),
    max_size=400,
)


@given(text=_TEXTS)
@settings(max_examples=200, deadline=None)
def test_vectorised_walk_counts_exactly_what_py3langid_counts(text: str) -> None:
    from py3langid.langid import visit_counts

    model: Any = language.language_identifier(("de", "en"), default_cache_dir())
    assert model.walk is not None
    data = model._encode(text)
    expected = visit_counts(model.tk_nextmove, model._rowbase, model.tk_output, data)
    found = model.walk.visits(data)
    # Same features, same counts, same order: the score sums them in that order.
    assert (None if found is None else list(found.items())) == (None if expected is None else list(expected.items()))


@pytest.mark.parametrize("text", [GERMAN, ENGLISH, "Teams Meeting Richtlinien", "Qdrant", "", "x" * 5000])
def test_the_vectorised_identifier_classifies_as_the_packaged_model(text: str) -> None:
    from py3langid.langid import MODEL_FILE, LanguageIdentifier

    packaged = LanguageIdentifier.from_model_file(MODEL_FILE, norm_probs=True)
    packaged.set_languages(["de", "en"])
    model: Any = language.language_identifier(("de", "en"), default_cache_dir())
    assert model.classify(text) == packaged.classify(text)


def test_dfa_memory_is_zero_for_an_automaton_that_never_forgets() -> None:
    import numpy as np

    # Two states that flip on byte 0 and stay on every other byte: the state depends on the whole text.
    rows = np.array([0, 1], dtype=np.uint16)
    nextmove = np.zeros(2 * 256, dtype=np.uint32)
    nextmove[:256], nextmove[256:] = 0, 1
    nextmove[0], nextmove[256] = 1, 0
    assert language.dfa_memory(nextmove, rows) == 0
    # One that only remembers the last byte (state = whether it was byte 0).
    nextmove[:256] = nextmove[256:] = 0
    nextmove[0] = nextmove[256] = 1
    assert language.dfa_memory(nextmove, rows) == 1


def test_installs_of_the_same_model_share_one_copy_and_stale_copies_go(tmp_path: Path) -> None:
    """A copy per install (keyed by the packaged file's mtime) left 68 MB behind each time: the copy is
    keyed by content, and making one removes older copies and crashed runs' temporaries."""
    import os
    import time

    from py3langid.langid import MODEL_DIR, MODEL_FILE

    root = tmp_path / "cache"
    old = root / "langid-2-4586720-1796116007980374711"
    (old / "sub").mkdir(parents=True)
    crashed = root / "langid-2-abc.tmp1234"
    crashed.mkdir()
    os.utime(crashed, (time.time() - 7200, time.time() - 7200))
    writing = root / "langid-2-def.tmp5678"
    writing.mkdir()  # fresh: another process may be writing it
    unrelated = root / "other-tool"
    unrelated.mkdir()
    installs = []
    for name in ("venv-a", "venv-b"):
        packaged = tmp_path / name / MODEL_FILE
        packaged.parent.mkdir(parents=True)
        packaged.write_bytes((MODEL_DIR / MODEL_FILE).read_bytes())  # same bytes, another path and mtime
        installs.append(language._unpacked_model(packaged, root))
    assert installs[0] is not None and installs[0] == installs[1]
    assert sorted(p.name for p in root.iterdir()) == sorted([installs[0].name, writing.name, unrelated.name])


def test_the_copy_reads_only_the_languages_asked_for_in_the_layout_py3langid_makes(tmp_path: Path) -> None:
    """A query's model load reads two languages' scores, not 142 (issue 26); the arrays a search then
    scores with are the packaged model's, value for value and in the same memory layout."""
    import numpy as np
    from py3langid.langid import MODEL_FILE, LanguageIdentifier

    packaged = LanguageIdentifier.from_model_file(MODEL_FILE, norm_probs=True)
    packaged.set_languages(["de", "en"])
    model: Any = language.language_identifier(("de", "en"), tmp_path)
    assert model.nb_classes == packaged.nb_classes == ["de", "en"]
    for ours, theirs in ((model.nb_ptc, packaged.nb_ptc), (model.nb_pc, packaged.nb_pc)):
        assert ours.dtype == theirs.dtype and ours.strides == theirs.strides and np.array_equal(ours, theirs)
    assert isinstance(model.walk._nextmove, np.memmap)  # the DFA is mapped, not read


def test_the_packaged_models_hash_is_kept_by_its_stat_key(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The copy's name needs the packaged model's hash: kept beside the copies while the file's stat key
    holds (not while racily new), computed again when the file changes."""
    from mindnet import file_stat
    from mindnet.language import _content_key

    packaged = tmp_path / "model.plzma"
    packaged.write_bytes(b"model v1" * 100)
    root = tmp_path / "cache"
    root.mkdir()
    first = _content_key(packaged, root)
    assert not (root / "langid-hashes.json").exists()  # racily new: not kept
    monkeypatch.setattr(file_stat, "RACY_SECONDS", 0.0)
    assert _content_key(packaged, root) == first
    kept = json.loads((root / "langid-hashes.json").read_text(encoding="utf-8"))
    kept[str(packaged)]["hash"] = "kept"
    (root / "langid-hashes.json").write_text(json.dumps(kept), encoding="utf-8")
    assert _content_key(packaged, root) == "kept"  # the kept hash is trusted while the stat key holds
    replaced = tmp_path / "new"
    replaced.write_bytes(b"model v2" * 100)
    os.replace(replaced, packaged)  # another inode: hashed again
    assert _content_key(packaged, root) not in ("kept", first)
