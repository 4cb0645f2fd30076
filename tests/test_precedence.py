"""R26 for every setting: defaults < mindnet.toml < MINDNET_* < flags (issue 13, finding 5).

Each layer is shown to override the one below it, per setting, generated from `Settings` itself so a
new setting cannot skip a layer; the per-type tables belong to the file layer; a store folder and a
Qdrant URL from different layers resolve by layer, never silently.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest

from mindnet import cli
from mindnet.config import Settings, env_names, load_settings
from mindnet.errors import ConfigError

DERIVED = {"profiles", "recursive", "recursive_by_type", "strategy_by_type", "notices"}
SCALARS = [f for f in dataclasses.fields(Settings) if f.name not in DERIVED]
ENV_OF = {setting: var for var, setting in env_names().items()}


def _samples(name: str, default: Any) -> tuple[Any, str, Any, tuple[Any, Any, Any]]:
    """(TOML value, environment string, flag value, expected after file / env / flag) for one setting."""
    if name == "strategy":
        return "recursive", "structure", "recursive", ("recursive", "structure", "recursive")
    if name == "lexical_shape":  # a choice of names, like the strategy
        return "measured", "engine", "measured", ("measured", "engine", "measured")
    if isinstance(default, bool):
        return (not default), str(default).lower(), (not default), (not default, default, not default)
    if isinstance(default, int):
        return default + 1, str(default + 2), default + 3, (default + 1, default + 2, default + 3)
    if isinstance(default, float):
        return default + 0.5, str(default + 1.0), default + 1.5, (default + 0.5, default + 1.0, default + 1.5)
    if isinstance(default, tuple) or name == "tag_scheme":
        return ["t1"], "e1, e2", ("f1",), (("t1",), ("e1", "e2"), ("f1",))
    return "from-file", "from-env", "from-flag", ("from-file", "from-env", "from-flag")


def _toml(name: str, value: Any) -> str:
    return f"{name} = {json.dumps(value)}\n"


@pytest.mark.parametrize("field", SCALARS, ids=lambda f: f.name)
def test_each_layer_overrides_the_one_below(tmp_path: Path, field: dataclasses.Field[Any]) -> None:
    name = field.name
    default = getattr(load_settings(tmp_path, env={}), name)
    if name != "cache_dir":  # its default follows the environment (XDG_CACHE_HOME)
        assert default == getattr(Settings(), name)
    in_file, in_env, as_flag, (want_file, want_env, want_flag) = _samples(name, default)
    (tmp_path / "mindnet.toml").write_text(_toml(name, in_file), encoding="utf-8")
    assert getattr(load_settings(tmp_path, env={}), name) == want_file
    env = {ENV_OF[name]: in_env}
    assert getattr(load_settings(tmp_path, env=env), name) == want_env
    assert getattr(load_settings(tmp_path, env=env, overrides={name: as_flag}), name) == want_flag


def test_every_setting_has_an_environment_variable() -> None:
    assert set(ENV_OF) >= {f.name for f in SCALARS}
    assert ENV_OF["store_path"] == "MINDNET_STORE"
    assert ENV_OF["recursive.max_chunk_size"] == "MINDNET_MAX_CHUNK_SIZE"


def test_per_type_strategy_is_part_of_the_file_layer(tmp_path: Path) -> None:
    (tmp_path / "mindnet.toml").write_text('strategy = "structure"\n[types.source]\nstrategy = "recursive"\n',
                                           encoding="utf-8")
    assert load_settings(tmp_path, env={}).strategy_for("source") == "recursive"  # the table beats the file
    by_env = load_settings(tmp_path, env={"MINDNET_STRATEGY": "structure"})
    assert by_env.strategy_for("source") == "structure"
    by_flag = load_settings(tmp_path, env={"MINDNET_STRATEGY": "recursive"}, overrides={"strategy": "structure"})
    assert by_flag.strategy_for("source") == "structure"


def test_per_type_recursive_keys_yield_to_env_and_flags_key_by_key(tmp_path: Path) -> None:
    (tmp_path / "mindnet.toml").write_text(
        "[recursive]\nmax_chunk_size = 120\n"
        '[types.source]\nstrategy = "recursive"\n'
        '[types.source.recursive]\nmax_chunk_size = 50\nseparators = ["\\n\\n"]\n',
        encoding="utf-8",
    )
    file_only = load_settings(tmp_path, env={})
    assert (file_only.recursive.max_chunk_size, file_only.recursive_for("source").max_chunk_size) == (120, 50)
    env = {"MINDNET_MAX_CHUNK_SIZE": "70"}
    by_env = load_settings(tmp_path, env=env)
    assert (by_env.recursive.max_chunk_size, by_env.recursive_for("source").max_chunk_size) == (70, 70)
    assert by_env.recursive_for("source").separators == ("\n\n",)  # keys the layer does not set stay
    by_flag = load_settings(tmp_path, env=env, overrides={"recursive": {"max_chunk_size": 90}})
    assert by_flag.recursive_for("source").max_chunk_size == 90
    grouped = load_settings(tmp_path, env={"MINDNET_SEPARATOR_GROUP": "markdown"})
    source = grouped.recursive_for("source")
    assert (source.separator_group, source.separators) == ("markdown", None)
    listed = load_settings(tmp_path, env={"MINDNET_SEPARATORS": '["\\\\n- "]'})
    assert listed.recursive_for("source").separators == ("\\n- ",)


def test_cli_strategy_flag_beats_the_per_type_table(tmp_path: Path) -> None:
    (tmp_path / "mindnet.toml").write_text('[types.source]\nstrategy = "recursive"\n', encoding="utf-8")
    settings = cli.settings_for(tmp_path, None, strategy="structure")
    assert settings.strategy_for("source") == "structure"
    flagged = cli.settings_for(tmp_path, None, max_chunk_size=40)
    assert flagged.recursive_for("source").max_chunk_size == 40


def test_bad_values_name_the_layer_they_came_from(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"^MINDNET_THREADS: invalid value for 'threads'"):
        load_settings(tmp_path, env={"MINDNET_THREADS": "many"})
    with pytest.raises(ConfigError, match=r"^MINDNET_STRATEGY: strategy must be"):
        load_settings(tmp_path, env={"MINDNET_STRATEGY": "semantic"})
    with pytest.raises(ConfigError, match=r"^--strategy: strategy must be"):
        load_settings(tmp_path, env={}, overrides={"strategy": "semantic"})
    with pytest.raises(ConfigError, match=r"^MINDNET_SEPARATORS: must be a JSON list"):
        load_settings(tmp_path, env={"MINDNET_SEPARATORS": "not json"})
    with pytest.raises(ConfigError, match=r"^MINDNET_MAX_CHUNK_SIZE: invalid value"):
        load_settings(tmp_path, env={"MINDNET_MAX_CHUNK_SIZE": "big"})


# --- a store folder and a Qdrant URL ------------------------------------------------------------------


URL = "http://127.0.0.1:9"


def test_store_flag_beats_a_url_from_the_environment_and_says_so(tmp_path: Path) -> None:
    settings = load_settings(tmp_path, env={"MINDNET_QDRANT_URL": URL}, overrides={"store_path": "/s"})
    assert (settings.qdrant_url, settings.store_path) == (None, "/s")
    (notice,) = settings.notices
    assert "--store /s" in notice and "MINDNET_QDRANT_URL" in notice and URL in notice


def test_url_and_store_at_the_same_layer_keep_the_folder_for_caches(tmp_path: Path) -> None:
    settings = load_settings(tmp_path, env={"MINDNET_QDRANT_URL": URL, "MINDNET_STORE": "/s"})
    assert (settings.qdrant_url, settings.store_path, settings.notices) == (URL, "/s", ())
    (tmp_path / "mindnet.toml").write_text('store_path = "/f"\n', encoding="utf-8")
    above_file = load_settings(tmp_path, env={"MINDNET_QDRANT_URL": URL})
    assert (above_file.qdrant_url, above_file.store_path, above_file.notices) == (URL, "/f", ())


def test_cli_warns_when_store_overrides_the_url(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    vault = tmp_path / "v"
    vault.mkdir()
    (vault / "a.md").write_text("# A\n\ntext\n", encoding="utf-8")
    monkeypatch.setenv("MINDNET_QDRANT_URL", URL)
    monkeypatch.delenv("MINDNET_STORE", raising=False)
    store = tmp_path / "store"
    with pytest.raises(SystemExit) as done:
        cli.main(["status", "--vault", str(vault), "--store", str(store), "--json"])
    captured = capsys.readouterr()
    assert done.value.code == 0
    assert json.loads(captured.out)["store"] == str(store / "qdrant")
    assert captured.err.splitlines() == [
        f"warning: --store {store} overrides qdrant_url {URL} from MINDNET_QDRANT_URL: "
        "using the embedded store in that folder"
    ]


def test_per_type_tables_from_a_caller_merge_over_the_files(tmp_path: Path) -> None:
    (tmp_path / "mindnet.toml").write_text("[profiles.task]\nmax = 300\ntarget_max = 250\n", encoding="utf-8")
    settings = load_settings(tmp_path, env={}, overrides={"profiles": {"task": {"max": 280}}})
    task = settings.profile_for("task")
    assert (task.max, task.target_max) == (280, 250)
