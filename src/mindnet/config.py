"""Settings: defaults < `mindnet.toml` (in the vault or `--config`) < `MINDNET_*` env < flags (R26).

`load_settings` is called once by an entry point (CLI, API, MCP); everything below receives the
frozen `Settings` value and never reads the environment itself.
"""

from __future__ import annotations

import dataclasses
import os
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .errors import ConfigError


@dataclass(frozen=True, slots=True)
class Profile:
    """Chunk sizes for one note type, in tokens of the embedding model's tokenizer (SPEC §2)."""

    target_min: int
    """Packing stops adding blocks once a chunk reaches this size..."""
    target_max: int
    """...and prefers to stop before passing this one."""
    max: int
    """Hard ceiling; only a single atomic block may exceed it (`oversize`)."""
    overlap_min: int
    """Overlap aims for at least this many tokens of whole trailing sentences."""
    overlap_max: int
    """Overlap never exceeds this unless one sentence alone is longer."""


DEFAULT_PROFILES: dict[str, Profile] = {
    "thought": Profile(150, 250, 300, 30, 40),
    "experience": Profile(250, 350, 450, 40, 60),
    "journal": Profile(200, 300, 400, 30, 50),
    "task": Profile(120, 200, 250, 20, 30),
    "project": Profile(300, 450, 600, 50, 70),
    "concept": Profile(250, 400, 550, 40, 60),
    "source": Profile(200, 350, 500, 30, 50),
    "default": Profile(250, 350, 400, 40, 60),
}

DEFAULT_STOP_SECTIONS = ("Mögliche Verbindungen", "Possible connections")


@dataclass(frozen=True, slots=True)
class RecursiveSettings:
    """Elasticsearch-compatible recursive strategy (R13); validated by `chunking.recursive`."""

    max_chunk_size: int = 250
    separator_group: str | None = "plaintext"
    separators: tuple[str, ...] | None = None
    sentence_overlap: int = 0


def default_cache_dir(env: Mapping[str, str] | None = None) -> str:
    """`$XDG_CACHE_HOME/mindnet`, else `~/.cache/mindnet`: where files derived from packaged models live."""
    env = os.environ if env is None else env
    return str(Path(env.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "mindnet")


@dataclass(frozen=True, slots=True)
class Settings:
    """Everything a run needs, resolved once at the entry point."""

    languages: tuple[str, ...] = ("de", "en")
    max_file_bytes: int = 5 * 1024 * 1024
    strict: bool = False
    strategy: str = "structure"
    profiles: Mapping[str, Profile] = field(default_factory=lambda: dict(DEFAULT_PROFILES))
    stop_sections: tuple[str, ...] = DEFAULT_STOP_SECTIONS
    recursive: RecursiveSettings = field(default_factory=RecursiveSettings)
    recursive_by_type: Mapping[str, RecursiveSettings] = field(default_factory=dict)
    strategy_by_type: Mapping[str, str] = field(default_factory=dict)
    model: str = "use"
    quality_tier: bool = False
    """Fill the e5 vector after each import. Off by default until search fuses it (issue 7)."""
    embed_title_prefix: bool = True
    threads: int = 0
    """0 means one per core."""
    store_path: str | None = None
    collection_prefix: str = "mindnet"
    qdrant_url: str | None = None
    qdrant_api_key: str | None = None
    shard_number: int = 1
    replication_factor: int = 1
    hnsw_m: int = 16
    hnsw_ef_construct: int = 128
    note_references: bool = False
    has_section_edges: bool = False
    neighbors: bool = True
    transclude_embeds: bool = True
    id_scheme: str | None = None
    tag_scheme: tuple[str, ...] | None = None
    cache_dir: str | None = field(default_factory=default_cache_dir)
    """Per-user cache of files derived from packaged models (py3langid's unpacked tables); None keeps none."""

    def profile_for(self, note_type: str) -> Profile:
        """The profile of a note type, or the default profile for any other type."""
        return self.profiles.get(note_type) or self.profiles["default"]

    def strategy_for(self, note_type: str) -> str:
        return self.strategy_by_type.get(note_type, self.strategy)

    def recursive_for(self, note_type: str) -> RecursiveSettings:
        return self.recursive_by_type.get(note_type, self.recursive)


_ENV_FIELDS: dict[str, str] = {
    "MINDNET_LANGUAGES": "languages",
    "MINDNET_MAX_FILE_BYTES": "max_file_bytes",
    "MINDNET_STRICT": "strict",
    "MINDNET_STRATEGY": "strategy",
    "MINDNET_MODEL": "model",
    "MINDNET_QUALITY_TIER": "quality_tier",
    "MINDNET_THREADS": "threads",
    "MINDNET_STORE": "store_path",
    "MINDNET_COLLECTION_PREFIX": "collection_prefix",
    "MINDNET_QDRANT_URL": "qdrant_url",
    "MINDNET_QDRANT_API_KEY": "qdrant_api_key",
    "MINDNET_SHARD_NUMBER": "shard_number",
    "MINDNET_REPLICATION_FACTOR": "replication_factor",
    "MINDNET_NOTE_REFERENCES": "note_references",
    "MINDNET_NEIGHBORS": "neighbors",
    "MINDNET_CACHE_DIR": "cache_dir",
}


def store_dir(vault: str | Path, settings: Settings) -> Path:
    """Where a vault's embedded store lives: `--store`/`MINDNET_STORE`, else `VAULT/.mindnet/`.

    Here, not in the import, because every command needs it first: a CLI call finds a running
    server's address in this folder before it loads anything heavy.
    """
    return Path(settings.store_path) if settings.store_path else Path(vault) / ".mindnet"


def load_settings(
    vault: str | Path | None = None,
    config_file: str | Path | None = None,
    env: Mapping[str, str] | None = None,
    overrides: Mapping[str, Any] | None = None,
) -> Settings:
    """Build the frozen settings from the four layers of R26.

    Raises:
        ConfigError: a file that cannot be parsed or a value of the wrong type, naming the source.
    """
    raw: dict[str, Any] = {}
    path = Path(config_file) if config_file else (Path(vault) / "mindnet.toml" if vault else None)
    if path is not None and (config_file or path.is_file()):
        raw.update(_read_toml(path))
    env = os.environ if env is None else env
    for key, name in _ENV_FIELDS.items():
        if key in env and env[key] != "":
            raw[name] = env[key]
    for name, value in (overrides or {}).items():
        if value is not None:
            raw[name] = value
    raw.setdefault("cache_dir", default_cache_dir(env))
    return _build(raw, source=str(path) if path else "settings")


def _read_toml(path: Path) -> dict[str, Any]:
    try:
        with path.open("rb") as fh:
            data = tomllib.load(fh)
    except FileNotFoundError:
        raise ConfigError(f"{path}: config file not found") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: invalid TOML: {exc}") from None
    # A `[mindnet]` table is accepted too, for people who keep several tools' settings in one file.
    return dict(data.get("mindnet", data))


_BOOL_TRUE = {"1", "true", "yes", "on"}
_BOOL_FALSE = {"0", "false", "no", "off"}


def _coerce(name: str, value: Any, kind: Any, source: str) -> Any:
    try:
        if kind is bool and isinstance(value, str):
            low = value.strip().lower()
            if low in _BOOL_TRUE | _BOOL_FALSE:
                return low in _BOOL_TRUE
            raise ValueError(value)
        if kind is bool:
            return bool(value)
        if kind is int:
            if isinstance(value, bool):
                raise ValueError(value)
            return int(value)
        if kind == "tuple":
            if isinstance(value, str):
                return tuple(v.strip() for v in value.split(",") if v.strip())
            return tuple(str(v) for v in value)
        return value
    except (TypeError, ValueError):
        raise ConfigError(f"{source}: invalid value for {name!r}: {value!r}") from None


_FIELD_KINDS: dict[str, Any] = {
    "languages": "tuple",
    "max_file_bytes": int,
    "strict": bool,
    "quality_tier": bool,
    "embed_title_prefix": bool,
    "threads": int,
    "shard_number": int,
    "replication_factor": int,
    "hnsw_m": int,
    "hnsw_ef_construct": int,
    "note_references": bool,
    "has_section_edges": bool,
    "neighbors": bool,
    "transclude_embeds": bool,
    "stop_sections": "tuple",
    "tag_scheme": "tuple",
}


def _build(raw: dict[str, Any], source: str) -> Settings:
    known = {f.name for f in dataclasses.fields(Settings)}
    values: dict[str, Any] = {}
    for name, value in raw.items():
        if name in ("profiles", "recursive", "types"):
            continue
        if name not in known:
            raise ConfigError(f"{source}: unknown setting {name!r}")
        values[name] = _coerce(name, value, _FIELD_KINDS.get(name, str), source)
    profiles = dict(DEFAULT_PROFILES)
    for type_name, spec in _table(raw.get("profiles"), "profiles", source).items():
        spec = _table(spec, f"profiles.{type_name}", source)
        profiles[type_name] = _profile(type_name, spec, profiles.get(type_name, DEFAULT_PROFILES["default"]), source)
    values["profiles"] = profiles
    if "recursive" in raw:
        values["recursive"] = _recursive(_table(raw["recursive"], "recursive", source), RecursiveSettings(), source)
    by_type: dict[str, RecursiveSettings] = {}
    strategies: dict[str, str] = {}
    for type_name, spec in _table(raw.get("types"), "types", source).items():
        spec = _table(spec, f"types.{type_name}", source)
        if "strategy" in spec:
            strategies[type_name] = _strategy(spec["strategy"], f"types.{type_name}.strategy", source)
        if "recursive" in spec:
            table = _table(spec["recursive"], f"types.{type_name}.recursive", source)
            by_type[type_name] = _recursive(table, values.get("recursive", RecursiveSettings()), source)
    values["recursive_by_type"] = by_type
    values["strategy_by_type"] = strategies
    settings = Settings(**values)
    _strategy(settings.strategy, "strategy", source)
    return settings


def _table(value: Any, key: str, source: str) -> Mapping[str, Any]:
    """A TOML table (absent: empty); `profiles = 3` names the key instead of failing deep inside."""
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise ConfigError(f"{source}: {key!r} must be a table ([{key}]), not {value!r}")
    return value


def _strategy(value: Any, key: str, source: str) -> str:
    if value not in ("structure", "recursive"):
        what = "strategy" if key == "strategy" else key
        raise ConfigError(f"{source}: {what} must be 'structure' or 'recursive', not {value!r}")
    return str(value)


def _profile(name: str, spec: Mapping[str, Any], base: Profile, source: str) -> Profile:
    fields = {f.name for f in dataclasses.fields(Profile)}
    unknown = set(spec) - fields
    if unknown:
        raise ConfigError(f"{source}: profile {name!r}: unknown keys {sorted(unknown)}")
    merged = {f: _coerce(f"profiles.{name}.{f}", spec.get(f, getattr(base, f)), int, source) for f in fields}
    profile = Profile(**merged)
    if not (0 < profile.target_min <= profile.target_max <= profile.max):
        raise ConfigError(f"{source}: profile {name!r}: need 0 < target_min <= target_max <= max")
    if not (0 <= profile.overlap_min <= profile.overlap_max < profile.max):
        raise ConfigError(f"{source}: profile {name!r}: need 0 <= overlap_min <= overlap_max < max")
    return profile


def _recursive(spec: Mapping[str, Any], base: RecursiveSettings, source: str) -> RecursiveSettings:
    values = dataclasses.asdict(base)
    for key, value in spec.items():
        if key not in values:
            raise ConfigError(f"{source}: recursive: unknown key {key!r}")
        values[key] = value
    if "separators" in spec and "separator_group" not in spec:
        values["separator_group"] = None
    if values["separators"] is not None:
        values["separators"] = tuple(values["separators"])
    return RecursiveSettings(**values)
