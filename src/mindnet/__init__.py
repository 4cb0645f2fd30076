"""mindnet: a vault of Markdown notes as a retrievable knowledge network in Qdrant."""

from .config import Settings, load_settings
from .errors import ConfigError, MindnetError, NoteError, StoreError
from .vault import Note, NoteProblem, VaultResult, read_vault

__all__ = [
    "ConfigError",
    "MindnetError",
    "Note",
    "NoteError",
    "NoteProblem",
    "Settings",
    "StoreError",
    "VaultResult",
    "load_settings",
    "read_vault",
]
__version__ = "0.1.0"
