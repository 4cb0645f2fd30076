"""Settings layers (R26): defaults < mindnet.toml < MINDNET_* environment < flags."""

from __future__ import annotations

from pathlib import Path

import pytest

from mindnet.config import DEFAULT_PROFILES, Profile, Settings, load_settings
from mindnet.errors import ConfigError


def test_defaults_match_the_spec_profile_table() -> None:
    settings = load_settings(env={})
    assert settings.profile_for("thought") == Profile(150, 250, 300, 30, 40)
    assert settings.profile_for("project") == Profile(300, 450, 600, 50, 70)
    assert settings.profile_for("anything-else") == DEFAULT_PROFILES["default"]
    assert settings.languages == ("de", "en")
    assert settings.strategy == "structure"


def test_layers_override_in_order(tmp_path: Path) -> None:
    (tmp_path / "mindnet.toml").write_text(
        'model = "use"\ncollection_prefix = "toml"\nstrict = true\n[profiles.thought]\nmax = 320\n',
        encoding="utf-8",
    )
    env = {"MINDNET_COLLECTION_PREFIX": "env", "MINDNET_STRICT": "false"}
    settings = load_settings(tmp_path, env=env, overrides={"collection_prefix": "flag"})
    assert settings.collection_prefix == "flag"
    assert settings.strict is False
    assert settings.profile_for("thought") == Profile(150, 250, 320, 30, 40)


def test_recursive_settings_globally_and_per_type(tmp_path: Path) -> None:
    (tmp_path / "mindnet.toml").write_text(
        '[recursive]\nmax_chunk_size = 120\nseparator_group = "markdown"\n'
        '[types.source]\nstrategy = "recursive"\n[types.source.recursive]\nseparators = ["\\n\\n"]\n',
        encoding="utf-8",
    )
    settings = load_settings(tmp_path, env={})
    assert settings.recursive.max_chunk_size == 120
    assert settings.recursive.separator_group == "markdown"
    assert settings.strategy_for("source") == "recursive"
    assert settings.strategy_for("thought") == "structure"
    per_type = settings.recursive_for("source")
    assert per_type.separators == ("\n\n",)
    assert per_type.separator_group is None
    assert per_type.max_chunk_size == 120


@pytest.mark.parametrize(
    ("toml", "message"),
    [
        ("bogus = 1\n", "unknown setting 'bogus'"),
        ("strict = 'maybe'\n", "invalid value for 'strict'"),
        ("strategy = 'semantic'\n", "strategy must be 'structure' or 'recursive'"),
        ("[profiles.task]\nmax = 10\n", "profile 'task': need 0 < target_min <= target_max <= max"),
        ("x = [\n", "invalid TOML"),
        ("lexical_shape = 'bm42'\n", "invalid value for 'lexical_shape'"),
        ("lexical_strict = 'sometimes'\n", "invalid value for 'lexical_strict'"),
        ("dense_note_tokens = -1\n", "invalid value for 'dense_note_tokens'"),
        ("dense_note_tokens = 1e9\n", "invalid value for 'dense_note_tokens'"),
        ("languages = []\n", "invalid value for 'languages'"),
        ("note_windows = 0\n", "invalid value for 'note_windows'"),
        ("note_windows = 65\n", "invalid value for 'note_windows'"),
        ("note_windows = 2.5\n", "invalid value for 'note_windows'"),
        ("note_windows = true\n", "invalid value for 'note_windows'"),
        ("note_windows = inf\n", "invalid value for 'note_windows'"),
        ("note_windows = nan\n", "invalid value for 'note_windows'"),
        ("threads = inf\n", "invalid value for 'threads'"),
    ],
)
def test_bad_config_names_the_file(tmp_path: Path, toml: str, message: str) -> None:
    (tmp_path / "mindnet.toml").write_text(toml, encoding="utf-8")
    with pytest.raises(ConfigError) as info:
        load_settings(tmp_path, env={})
    assert str(tmp_path / "mindnet.toml") in str(info.value)
    assert message in str(info.value)


def test_env_lists_and_numbers() -> None:
    settings = load_settings(env={"MINDNET_LANGUAGES": "de, en, fr", "MINDNET_THREADS": "3"})
    assert settings.languages == ("de", "en", "fr")
    assert settings.threads == 3


def test_the_retrieval_representation_keys(tmp_path: Path) -> None:
    """Issue 15's representation is settable like any key: file, environment, flags, each away from the
    default. `dense_note_tokens` is a count of tokens (60 measured), not a 0-10 weight."""
    default = Settings()
    assert (default.lexical_shape, default.lexical_strict, default.dense_note_tokens) == ("measured", True, 0.0)
    (tmp_path / "mindnet.toml").write_text('lexical_shape = "engine"\ndense_note_tokens = 60\n', encoding="utf-8")
    settings = load_settings(tmp_path, env={"MINDNET_LEXICAL_STRICT": "no"})
    assert (settings.lexical_shape, settings.lexical_strict, settings.dense_note_tokens) == ("engine", False, 60.0)
    flags = load_settings(tmp_path, env={}, overrides={"lexical_shape": "measured", "lexical_strict": True})
    assert (flags.lexical_shape, flags.lexical_strict) == ("measured", True)


def test_a_language_the_detector_does_not_know_is_a_config_error() -> None:
    """`languages = ["de", "xx"]` was py3langid's "Unknown language code" as an internal error."""
    from mindnet.language import detect_language

    with pytest.raises(ConfigError, match="'xx' unknown to the language detector"):
        detect_language("Hallo Welt, das ist ein Test.", ("de", "xx"))
    assert detect_language("Hallo Welt, das ist ein Test.", ("de", "fr")) == "de"
