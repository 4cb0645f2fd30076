"""Settings: defaults < `mindnet.toml` (in the vault or `--config`) < `MINDNET_*` env < flags (R26).

`load_settings` is called once by an entry point (CLI, API, MCP); everything below receives the
frozen `Settings` value and never reads the environment itself.
"""

from __future__ import annotations

import dataclasses
import json
import os
import socket
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
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


MAX_NOTE_WINDOWS = 64
"""The most windows a note's multivector holds (`note_windows`): one point's vectors stay bounded (64 × 512)."""


@dataclass(frozen=True, slots=True)
class Settings:
    """Everything a run needs, resolved once at the entry point."""

    languages: tuple[str, ...] = ("de", "en")
    max_file_bytes: int = 5 * 1024 * 1024
    frontmatter_max_nodes: int = 10_000
    """Frontmatter values counted with YAML aliases expanded; a note over it is skipped ("billion laughs")."""
    frontmatter_max_depth: int = 64
    """Nesting of frontmatter lists and mappings; a note nested deeper is skipped."""
    strict: bool = False
    strategy: str = "structure"
    profiles: Mapping[str, Profile] = field(default_factory=lambda: dict(DEFAULT_PROFILES))
    stop_sections: tuple[str, ...] = DEFAULT_STOP_SECTIONS
    recursive: RecursiveSettings = field(default_factory=RecursiveSettings)
    recursive_by_type: Mapping[str, RecursiveSettings] = field(default_factory=dict)
    strategy_by_type: Mapping[str, str] = field(default_factory=dict)
    model: str = "use"
    quality_tier: bool = False
    """Fill the e5 vector after each import (slow; `mindnet serve` fills it in the background anyway).
    What it gains: docs/decisions/e5-weights.md."""
    embed_title_prefix: bool = True
    dense_context: float = 0.25
    """Weight of the chunk's H2 section in its stored dense vector: unit(v + w · unit(mean of the
    section's chunk vectors)); 0 stores each chunk's own vector. A short chunk alone is a weak
    query target; its section says what it is about (docs/decisions/chunk-context.md)."""
    dense_note_tokens: float = 0.0
    """Tokens' worth of its note's topic added to a chunk's stored dense vector: + (K / n) ·
    unit(mean of the note's chunk vectors), n the chunk's tokens; 0 (default) adds none. Lifts
    dense alone in every `loo` cell at 60, but not yet the default fusion (docs/decisions/chunk-context.md)."""
    note_vectors: bool = True
    """Give each note note-level evidence, held by its lead chunk: the note's `NOTE_WINDOW_TOKENS`-token
    windows (title and retrieval text) as a `note` multivector, and its fielded BM25 document (title,
    aliases, headings, path, text). A note then ranks by what it is about as a whole, not only by its
    best chunk; off, no window is embedded (the import costs less, search loses the note-level lists)."""
    note_windows: int = 16
    """Windows embedded per note at most (1–64): a longer note is known to the note-level list by its first
    `note_windows` × 300 tokens (~4,800 at 16); its chunks still carry all of it. Each window is a second pass
    of the model over the note's text, so this bounds what note-level evidence adds to an import of long notes.
    16 kept the 22 dev cells' out-of-sample figures, 8 did not (docs/decisions/search-representation.md)."""
    lexical_sections: bool = True
    """BM25 indexes the first chunk of each H2 section as the whole section, the others as their
    own text; off indexes every chunk alone. A question's terms are spread over several small
    chunks of one section, and the section is the unit that holds them together
    (docs/decisions/chunk-context.md)."""
    lexical_shape: str = "measured"
    """BM25's document constants for chunks (`store.lexical.BM25_SHAPES`): `measured` (default), b 0.3
    and avg_len 64 for chunks of ~90 tokens (issue 15, `bench/bm25_shape.py`), or `engine`, the engine's
    k 1.2, b 0.75, avg_len 256, which assume documents three times longer than a chunk. Part of the
    store's chunking hash: a change re-chunks the store once (embeddings come from the cache).
    Figures: docs/decisions/bm25-query-and-shape.md."""
    lexical_strict: bool = True
    """Search BM25 with `lexical_query(strict=True)` (default): a word that is a stopword in any vault
    language is no query term, and each word's stem is put through the other languages' rules. Off
    encodes the query under each language's rules alone, so a German function word ("als", "die")
    matches as a rare term in chunks detected as English (docs/decisions/bm25-query-and-shape.md).
    Query side only, so it needs no rebuild."""
    threads: int = 0
    """Forward-pass threads; 0: USE picks them from the measured load, e5 one per core."""
    embed_ahead: int = 2
    """Batches of chunks (256 each) the import queues for the encoder, which embeds them on a thread of
    its own while the next notes are chunked and finished batches written; 0 does it all on one thread."""
    import_batch_notes: int = 256
    """Notes an import loads, chunks, links and writes at a time (issue 27): what it holds in memory
    besides a few compact per-note records, whatever the vault's size."""
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
    notices: tuple[str, ...] = ()
    """What the layering decided that a user should hear (a store folder overriding a URL); not a setting."""

    def profile_for(self, note_type: str) -> Profile:
        """The profile of a note type, or the default profile for any other type."""
        return self.profiles.get(note_type) or self.profiles["default"]

    def strategy_for(self, note_type: str) -> str:
        return self.strategy_by_type.get(note_type, self.strategy)

    def recursive_for(self, note_type: str) -> RecursiveSettings:
        return self.recursive_by_type.get(note_type, self.recursive)


_TABLES = ("profiles", "recursive", "types")
"""Keys of `mindnet.toml` that hold tables; everything else is a scalar setting."""
_DERIVED = ("profiles", "recursive", "recursive_by_type", "strategy_by_type", "notices")
"""Settings fields that no layer sets by name (built from the tables, or reports)."""
_ENV_ALIASES = {"store_path": "MINDNET_STORE"}


def env_names() -> dict[str, str]:
    """`MINDNET_*` variable -> setting, one per scalar setting (R26: every setting has all four layers)."""
    names = {_ENV_ALIASES.get(f.name, f"MINDNET_{f.name.upper()}"): f.name for f in dataclasses.fields(Settings)
             if f.name not in _DERIVED}
    names.update({f"MINDNET_{key.upper()}": f"recursive.{key}" for key in _RECURSIVE_KEYS})
    return names


_RECURSIVE_KEYS = tuple(f.name for f in dataclasses.fields(RecursiveSettings))


@dataclass(frozen=True, slots=True)
class _Layer:
    """One layer above the file: its scalar settings and its `recursive` keys, and how to name a key."""

    name: str
    values: Mapping[str, Any]
    recursive: Mapping[str, Any]

    def source(self, key: str) -> str:
        """How a user set `key` in this layer: `MINDNET_THREADS`, `--strategy`, …"""
        if self.name == "environment":
            return next((k for k, v in env_names().items() if v == key), self.name)
        if key == "store_path":
            return "--store"
        return "--" + key.removeprefix("recursive.").replace("_", "-")


def store_dir(vault: str | Path, settings: Settings) -> Path:
    """Where a vault's embedded store lives: `--store`/`MINDNET_STORE`, else `VAULT/.mindnet/`.

    Here, not in the import, because every command needs it first: a CLI call finds a running
    server's address in this folder before it loads anything heavy.
    """
    return Path(settings.store_path) if settings.store_path else Path(vault) / ".mindnet"


STORE_GITIGNORE = "# written by mindnet: the store and its caches are rebuilt by `mindnet import`, never versioned\n*\n"
WRITER_FILE = "writer.json"


def prepare_store_dir(folder: Path) -> Path:
    """Create a store folder with its own `.gitignore` (`*`), as `.venv` and `.pytest_cache` do.

    A vault kept in git would otherwise commit the live Qdrant store and its caches on the next
    `git add .`. The file is written where mindnet creates the folder, and in any `.mindnet` folder
    (the default place, always mindnet's own); a folder a user chose and filled is left alone.
    """
    created = not folder.exists()
    folder.mkdir(parents=True, exist_ok=True)
    ignore = folder / ".gitignore"
    if (created or folder.name == ".mindnet") and not ignore.exists():
        tmp = folder / f".gitignore.{os.getpid()}.tmp"
        tmp.write_text(STORE_GITIGNORE, encoding="utf-8")
        os.replace(tmp, ignore)
    return folder


def record_writer(folder: Path) -> None:
    """Note which machine wrote the store last, so a copy synced to another machine can say so."""
    record = {"host": socket.gethostname(), "pid": os.getpid(), "at": datetime.now(UTC).isoformat(timespec="seconds")}
    tmp = folder / f"{WRITER_FILE}.{os.getpid()}.tmp"
    tmp.write_text(json.dumps(record) + "\n", encoding="utf-8")
    os.replace(tmp, folder / WRITER_FILE)


def last_writer(folder: Path) -> dict[str, Any] | None:
    """The record `record_writer` left (host, pid, at), or None for a store never written (or unreadable)."""
    try:
        record = json.loads((folder / WRITER_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return record if isinstance(record, dict) and isinstance(record.get("host"), str) else None


OVERVIEW_FILE = "overview.json"


def record_overview(folder: Path, overview: dict[str, Any]) -> None:
    """Keep what the store holds at a glance (`api.Index.overview`) beside it, as the last import left it.

    `mindnet mcp` describes the vault in its first answer to a client; reading this file lets it
    answer before the store and the models are loaded (issue 26).
    """
    tmp = folder / f"{OVERVIEW_FILE}.{os.getpid()}.tmp"
    tmp.write_text(json.dumps(overview, ensure_ascii=False) + "\n", encoding="utf-8")
    os.replace(tmp, folder / OVERVIEW_FILE)


def last_overview(folder: Path) -> dict[str, Any] | None:
    """The overview `record_overview` kept, or None (never imported by this version, or unreadable)."""
    try:
        overview = json.loads((folder / OVERVIEW_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return overview if isinstance(overview, dict) and isinstance(overview.get("notes"), int) else None


def load_settings(
    vault: str | Path | None = None,
    config_file: str | Path | None = None,
    env: Mapping[str, str] | None = None,
    overrides: Mapping[str, Any] | None = None,
) -> Settings:
    """Build the frozen settings from the four layers of R26: defaults < file < `MINDNET_*` < flags.

    Each key is taken from the highest layer that sets it, per-type tables included: `[types.X]`
    belongs to the file layer, so a strategy or a recursive key from the environment or a flag
    applies to every type. `overrides` may hold `recursive` as a mapping of `RecursiveSettings` keys.
    A store folder set in a higher layer than a Qdrant URL wins over it, with a notice (`notices`).

    Raises:
        ConfigError: a file that cannot be parsed or a value of the wrong type, naming the source.
    """
    raw: dict[str, Any] = {}
    path = Path(config_file) if config_file else (Path(vault) / "mindnet.toml" if vault else None)
    if path is not None and (config_file or path.is_file()):
        raw.update(_read_toml(path))
    env = os.environ if env is None else env
    raw.setdefault("cache_dir", default_cache_dir(env))  # a default that follows the environment given
    from_env: dict[str, Any] = {}
    env_recursive: dict[str, Any] = {}
    for key, name in env_names().items():
        if env.get(key, "") != "":
            (env_recursive if name.startswith("recursive.") else from_env)[name.removeprefix("recursive.")] = env[key]
    for table in ("profiles", "types"):  # per-type tables from a caller: merged over the file's, key by key
        if (overrides or {}).get(table) is not None:
            given = _table(overrides[table], table, "overrides")  # type: ignore[index]
            raw[table] = _merged(_table(raw.get(table), table, "settings"), given)
    flags = {k: v for k, v in (overrides or {}).items() if v is not None and k not in _TABLES}
    flag_recursive = {k: v for k, v in dict((overrides or {}).get("recursive") or {}).items() if v is not None}
    layers = (_Layer("environment", from_env, env_recursive), _Layer("flags", flags, flag_recursive))
    return _build(raw, source=str(path) if path else "settings", layers=layers)


def _merged(base: Mapping[str, Any], top: Mapping[str, Any]) -> dict[str, Any]:
    """`top` over `base`, nested tables merged rather than replaced."""
    out = dict(base)
    for key, value in top.items():
        below = out.get(key)
        out[key] = _merged(below, value) if isinstance(below, Mapping) and isinstance(value, Mapping) else value
    return out


def _read_toml(path: Path) -> dict[str, Any]:
    """The settings of a TOML file; every way it can be bad is a ConfigError naming it.

    Why: a config file that was not UTF-8 ended each command with an internal UnicodeDecodeError,
    and a named pipe in its place would have been waited on.
    """
    import tomllib  # here: most vaults have no config file, and a one-off search should not load the parser

    try:
        if path.exists() and not path.is_file():
            raise ConfigError(f"{path}: config file is not a regular file")
        raw = path.read_bytes()
        data = tomllib.loads(raw.decode("utf-8"))
    except FileNotFoundError:
        raise ConfigError(f"{path}: config file not found") from None
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read config file: {(exc.strerror or str(exc)).lower()}") from None
    except UnicodeDecodeError as exc:
        line = raw.count(b"\n", 0, exc.start) + 1
        raise ConfigError(f"{path}: invalid UTF-8 (byte 0x{raw[exc.start]:02x} on line {line}); "
                          "save the file as UTF-8") from None
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
        if kind is float:
            return _bounded(value, MAX_WEIGHT)
        if kind == "tokens":
            return _bounded(value, MAX_NOTE_TOKENS)
        if kind == "windows":
            return _windows(value)
        if kind == "shape":
            if value not in LEXICAL_SHAPES:
                raise ValueError(value)
            return str(value)
        if kind in ("tuple", "languages"):
            if isinstance(value, str):
                items = tuple(v.strip() for v in value.split(",") if v.strip())
            else:
                items = tuple(str(v) for v in value)
            if kind == "languages" and not items:  # detection needs at least one language to choose
                raise ValueError(value)
            return items
        return value
    except (TypeError, ValueError, OverflowError):  # OverflowError: TOML's `inf` as a count
        raise ConfigError(f"{source}: invalid value for {name!r}: {value!r}") from None


def _bounded(value: Any, high: float) -> float:
    """A number in `[0, high]` as a float; a bool is refused (TOML's `true` is no weight)."""
    if isinstance(value, bool):
        raise ValueError(value)
    number = float(value)
    if not 0.0 <= number <= high:
        raise ValueError(value)
    return number


def _windows(value: Any) -> int:
    """A whole count in `[1, MAX_NOTE_WINDOWS]`; text from the environment or a flag is parsed first,
    and a fraction (TOML's `16.5`) or a bool is refused rather than rounded."""
    if isinstance(value, bool):
        raise ValueError(value)
    number = int(value.strip()) if isinstance(value, str) else value
    if not isinstance(number, int) and number != int(number):
        raise ValueError(value)
    number = int(number)
    if not 1 <= number <= MAX_NOTE_WINDOWS:
        raise ValueError(value)
    return number


LEXICAL_SHAPES = ("engine", "measured")
"""Names `lexical_shape` takes (the constants live in `store.lexical.BM25_SHAPES`, which config does not import)."""
MAX_WEIGHT = 10.0
"""The largest weight a float setting takes (`dense_context`, …)."""
MAX_NOTE_TOKENS = 10_000.0
"""`dense_note_tokens` is a count of tokens, not a weight (60 is the measured value): above a chunk's
largest size (600 tokens) by far; a larger value is a typo, not a setting."""


_FIELD_KINDS: dict[str, Any] = {
    "languages": "languages",
    "max_file_bytes": int,
    "frontmatter_max_nodes": int,
    "frontmatter_max_depth": int,
    "strict": bool,
    "quality_tier": bool,
    "embed_title_prefix": bool,
    "dense_context": float,
    "dense_note_tokens": "tokens",
    "lexical_sections": bool,
    "note_vectors": bool,
    "note_windows": "windows",
    "lexical_shape": "shape",
    "lexical_strict": bool,
    "threads": int,
    "embed_ahead": int,
    "import_batch_notes": int,
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


def _build(raw: dict[str, Any], source: str, layers: tuple[_Layer, ...] = ()) -> Settings:
    known = {f.name for f in dataclasses.fields(Settings)} - set(_DERIVED)
    values: dict[str, Any] = {}
    origin: dict[str, int] = {}
    """Setting -> layer that set it: 0 the file, 1.. the layers above it."""
    for level, (where, scalars) in enumerate([(None, raw), *((layer, layer.values) for layer in layers)]):
        for name, value in scalars.items():
            if name in _TABLES and where is None:
                continue
            here = source if where is None else where.source(name)
            if name not in known:
                raise ConfigError(f"{here}: unknown setting {name!r}")
            values[name] = _coerce(name, value, _FIELD_KINDS.get(name, str), here)
            origin[name] = level
    profiles = dict(DEFAULT_PROFILES)
    for type_name, spec in _table(raw.get("profiles"), "profiles", source).items():
        spec = _table(spec, f"profiles.{type_name}", source)
        profiles[type_name] = _profile(type_name, spec, profiles.get(type_name, DEFAULT_PROFILES["default"]), source)
    values["profiles"] = profiles
    base = RecursiveSettings()
    if "recursive" in raw:
        base = _recursive(_table(raw["recursive"], "recursive", source), base, source)
    by_type: dict[str, RecursiveSettings] = {}
    strategies: dict[str, str] = {}
    for type_name, spec in _table(raw.get("types"), "types", source).items():
        spec = _table(spec, f"types.{type_name}", source)
        if "strategy" in spec:
            strategies[type_name] = _strategy(spec["strategy"], f"types.{type_name}.strategy", source)
        if "recursive" in spec:
            table = _table(spec["recursive"], f"types.{type_name}.recursive", source)
            by_type[type_name] = _recursive(table, base, source)
    if origin.get("strategy", 0) > 0:
        strategies = {}  # a strategy from the environment or a flag is above every table of the file
    for layer in layers:
        if layer.recursive:
            typed = _typed_recursive(layer)
            base = _recursive(typed, base, layer.name)
            by_type = {t: _recursive(typed, r, layer.name) for t, r in by_type.items()}
    values["recursive"] = base
    values["recursive_by_type"] = by_type
    values["strategy_by_type"] = strategies
    values["notices"] = _store_choice(values, origin, source, layers)
    settings = Settings(**values)
    level = origin.get("strategy", 0)
    _strategy(settings.strategy, "strategy", source if level == 0 else layers[level - 1].source("strategy"))
    return settings


def _typed_recursive(layer: _Layer) -> dict[str, Any]:
    """A layer's `recursive` keys as the types the chunker takes: numbers, and a JSON list of separators."""
    typed: dict[str, Any] = {}
    for key, value in layer.recursive.items():
        here = layer.source(f"recursive.{key}")
        if key not in _RECURSIVE_KEYS:
            raise ConfigError(f"{here}: recursive: unknown key {key!r}")
        if key in ("max_chunk_size", "sentence_overlap"):
            value = _coerce(key, value, int, here)
        elif key == "separators" and isinstance(value, str):
            try:
                value = json.loads(value)
            except ValueError as exc:
                raise ConfigError(f"{here}: must be a JSON list of regular expressions: {exc}") from None
            if not isinstance(value, list):
                raise ConfigError(f"{here}: must be a JSON list of regular expressions")
        typed[key] = value
    return typed


def _store_choice(values: dict[str, Any], origin: Mapping[str, int], source: str,
                  layers: tuple[_Layer, ...]) -> tuple[str, ...]:
    """Where the vectors live when both a store folder and a Qdrant URL are set (R26 applied to R20).

    The higher layer wins: `--store DIR` beats `MINDNET_QDRANT_URL`, which beats `store_path` in the
    file. A URL at the same or a higher layer keeps the folder for the local caches only, as before.
    The loser is named in a notice, so a URL never wins (or loses) silently.
    """
    if not values.get("qdrant_url") or not values.get("store_path"):
        return ()
    store_level, url_level = origin["store_path"], origin["qdrant_url"]
    if store_level <= url_level:
        return ()
    url_from = source if url_level == 0 else layers[url_level - 1].source("qdrant_url")
    store_from = layers[store_level - 1].source("store_path")
    url = values.pop("qdrant_url")
    return (f"{store_from} {values['store_path']} overrides qdrant_url {url} from {url_from}: "
            f"using the embedded store in that folder",)


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
    # Separators and a separator group exclude each other (as in Elasticsearch): the one given here wins.
    if "separators" in spec and "separator_group" not in spec:
        values["separator_group"] = None
    if "separator_group" in spec and "separators" not in spec:
        values["separators"] = None
    if values["separators"] is not None:
        values["separators"] = tuple(values["separators"])
    return RecursiveSettings(**values)
