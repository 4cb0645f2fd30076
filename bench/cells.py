"""Leave-one-cell-out evaluation for `bench/search.py loo` (issue 15, Build 1 and 2).

A *cell* is one (question set, direction): foam-docs English and German questions on the
English vault, the rustbook questions in German and English on the German, the English and a
mixed vault, XQuAD in all four directions. Every knob of the fusion used to be chosen on the
same questions it was reported on; here a knob setting is chosen by the selection rule on all
cells but one and reported on the one left out, for each cell in turn, so every figure in the
out-of-sample column comes from a choice that never saw its questions.

The selection rule (`pick`): per cell, the margin of hybrid's nDCG@5 over the best single
baseline of the same cell (BM25 and dense over mindnet's chunks, BM25 and dense over fixed
300-token windows); settings are ranked leximin on those margins (the worst cell first, then the
second worst, ...), ties by the mean. No set or category decides alone.

Stores are built once under `--work` and reused (incremental import, embeddings cached in one
`use-cache.sqlite` shared by every corpus, so the mixed vault costs nothing it did not cost for
its two halves, and the fixed-window baselines keep their own caches). The mixed vault is a
folder of copies under `--work` (symlinks out of a vault are not followed by the reader, by
design), never inside the repo.

The report-only cells (`HELD_OUT`: msdocs and the Zettlr manual) are specified here too, outside
`CELLS`, so no selection can read them.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import random
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from _common import CORPORA, MSDOCS
from mindnet.config import Settings, load_settings
from mindnet.embedding import CachedEmbedder, Embedder, EmbeddingCache, UseEmbedder
from mindnet.evaluation import (
    EvalQuery,
    RawQuery,
    beir_queries,
    load_beir,
    load_vault_queries,
    opened,
    opened_fixed,
    resolve_queries,
    write_beir_vault,
)
from mindnet.search import Searcher

GOLDEN = Path(__file__).parent / "golden"
MIXED_SEED = 15
"""Seed of the mixed vault's language draw (issue 15): fixed, so every run sees the same vault."""


@dataclasses.dataclass(frozen=True)
class CellSpec:
    """One (question set, direction) and where its questions and notes come from."""

    name: str
    corpus: str
    """Key of `corpus_paths`."""
    questions: str
    """A golden file in bench/golden, or `xquad:<asked>:<searched>` (languages)."""
    categories: tuple[str, ...] = ()
    """Only these categories of the golden file (all when empty)."""
    exclude: tuple[str, ...] = ()
    """Every category but these."""
    mixed: bool = False
    """Judged as the mixed vault holds the notes: each row's `mixed` judgements where it has them
    (`zettlr_rows`); a row whose mixed `relevant` is empty is not asked."""


CELLS: tuple[CellSpec, ...] = (
    CellSpec("foam en→en", "foam", "foam-docs.jsonl", exclude=("multilingual",)),
    CellSpec("foam de→en", "foam", "foam-docs.jsonl", categories=("multilingual",)),
    CellSpec("rust de→de", "rust-de", "rustbook-de.jsonl"),
    CellSpec("rust de→en", "rust-en", "rustbook-de.jsonl"),
    CellSpec("rust en→en", "rust-en", "rustbook-en.jsonl"),
    CellSpec("rust en→de", "rust-de", "rustbook-en.jsonl"),
    CellSpec("rust de→mixed", "rust-mixed", "rustbook-de.jsonl"),
    CellSpec("rust en→mixed", "rust-mixed", "rustbook-en.jsonl"),
    CellSpec("xquad de→de", "xquad-de", "xquad:de:de"),
    CellSpec("xquad en→en", "xquad-en", "xquad:en:en"),
    CellSpec("xquad de→en", "xquad-en", "xquad:de:en"),
    CellSpec("xquad en→de", "xquad-de", "xquad:en:de"),
)
"""Every dev cell; `--cells` picks a subset by name prefix."""

MSDOCS_CELLS: tuple[CellSpec, ...] = (
    CellSpec("msdocs de→de", "msdocs", "msdocs-de.jsonl"),
    CellSpec("msdocs en→de", "msdocs", "msdocs-en.jsonl"),
)
"""Questions on a slice of the German Microsoft docs, written after every knob was chosen."""

ZETTLR_CELLS: tuple[CellSpec, ...] = (
    CellSpec("zettlr en→en", "zettlr-en", "zettlr-en.jsonl"),
    CellSpec("zettlr de→en", "zettlr-en", "zettlr-de.jsonl"),
    CellSpec("zettlr en→mixed", "zettlr-mixed", "zettlr-en.jsonl", mixed=True),
    CellSpec("zettlr de→mixed", "zettlr-mixed", "zettlr-de.jsonl", mixed=True),
)
"""Questions on the Zettlr manual (issue 25), a help vault of short pages with many sections: its 83
English pages, and a mixed vault with the German translations swapped in (`zettlr_mixed_vault`).
The questions were committed before any search change they are meant to judge."""

HELD_OUT: tuple[CellSpec, ...] = MSDOCS_CELLS + ZETTLR_CELLS
"""Report-only cells (`bench/search.py heldout`). No selection ever looks at them, so `loo` and
`grid` never read them; they are the figure nobody tuned on."""

MSDOCS_SLICE: tuple[str, ...] = ("Skype/SfbHybrid", "Skype/SfbOnline", "Teams/rooms")
"""The held-out vault: every `.md` below these folders of `msdocs-skype-teams-de/docs` (195 notes).
Three whole folders, not a sample, so the near neighbours of every judged note are in the vault too
and compete with it, as they would in a real documentation vault."""


def msdocs_slice_notes(docs: Path = MSDOCS / "docs") -> list[str]:
    """The slice's notes, paths relative to `docs` (the judgement keys), sorted.

    Raises:
        SystemExit: a slice folder is missing (no shared corpus): one line naming it, since an
            empty slice would only surface later as every judged note missing from the store.
    """
    for top in MSDOCS_SLICE:
        if not (docs / top).is_dir():
            raise SystemExit(f"{docs / top}: msdocs corpus folder not found (shared corpora go next to the repo)")
    return sorted(p.relative_to(docs).as_posix() for top in MSDOCS_SLICE for p in (docs / top).rglob("*.md"))


def msdocs_vault(folder: Path, docs: Path = MSDOCS / "docs") -> Path:
    """Copies of the slice's notes under `folder` (folders kept), rewritten only when missing or
    different; a file that is not in the slice is removed, so the vault is always exactly the rule."""
    wanted = msdocs_slice_notes(docs)
    for rel in wanted:
        src, dst = docs / rel, folder / rel
        text = src.read_bytes()
        if not dst.is_file() or dst.read_bytes() != text:
            dst.parent.mkdir(parents=True, exist_ok=True)
            dst.write_bytes(text)
    keep = set(wanted)
    for stale in folder.rglob("*.md"):
        if ".mindnet" not in stale.parts and stale.relative_to(folder).as_posix() not in keep:
            stale.unlink()
    return folder


ZETTLR_DOCS = CORPORA / "zettlr-docs/docs"
"""The Zettlr manual: `en/` (83 pages, the judgement keys are paths below it) and `de/` (11 pages)."""

ZETTLR_TRANSLATIONS: tuple[tuple[str, str], ...] = (
    ("index.md", "index.md"),
    ("faq.md", "reference/faq.md"),
    ("get-involved.md", "getting-started/get-involved.md"),
    ("install.md", "getting-started/setup.md"),
    ("academic/citations.md", "editor/citations.md"),
    ("academic/projects.md", "file-manager/projects.md"),
    ("academic/zkn-method.md", "pkms/zkn-method.md"),
    ("reference/settings.md", "reference/settings.md"),
    ("5-minutes.md", "5-minutes.md"),
    ("guides/guide-ide.md", "guides/guide-ide.md"),
    ("guides/guide-zettelkasten.md", "guides/guide-zettelkasten.md"),
)
"""Every German page (path below `de/`) and where the mixed vault puts it (a path as below `en/`),
found by reading both. Eight translate an older version of an English page, which they replace:
seven by file name (their folders moved since: `academic/` became `editor/`, `file-manager/` and
`pkms/`), and `install.md`, whose English successor is `getting-started/setup.md` (the same
sections: each system's installer, updates, betas, where the settings live). The last three
translate pages the English manual no longer has (a five-minute tour, since rewritten as
`first-time-users/*`; two setup guides under `guides/`): they keep their own path, where their
English original used to be, so the mixed vault has 86 notes. An older translation may lack what
the English page says now, or say more; each question's `mixed` judgements record that."""


def zettlr_mixed_sources(docs: Path = ZETTLR_DOCS) -> dict[str, Path]:
    """The mixed vault's rule: vault path -> the file it copies (English unless a German page is put there).

    Raises:
        SystemExit: the corpus (or one of its German pages) is missing: one line naming it.
    """
    en, de = docs / "en", docs / "de"
    for folder in (en, de):
        if not folder.is_dir():
            raise SystemExit(f"{folder}: zettlr-docs corpus folder not found (shared corpora go next to the repo)")
    out = {p.relative_to(en).as_posix(): p for p in sorted(en.rglob("*.md"))}
    for german, at in ZETTLR_TRANSLATIONS:
        if not (de / german).is_file():
            raise SystemExit(f"{de / german}: German page of the zettlr-docs corpus not found")
        out[at] = de / german
    return out


def zettlr_mixed_vault(folder: Path, docs: Path = ZETTLR_DOCS) -> Path:
    """Copies of the 83 English pages with the German translations in place (`ZETTLR_TRANSLATIONS`),
    rewritten only when missing or different; a Markdown file the rule does not name is removed, so
    the vault is always exactly the rule's output and every judgement key still names a note."""
    wanted = zettlr_mixed_sources(docs)
    for rel, src in wanted.items():
        dst, text = folder / rel, src.read_bytes()
        if not dst.is_file() or dst.read_bytes() != text:
            dst.parent.mkdir(parents=True, exist_ok=True)
            dst.write_bytes(text)
    for stale in folder.rglob("*.md"):
        if ".mindnet" not in stale.parts and stale.relative_to(folder).as_posix() not in wanted:
            stale.unlink()
    return folder


def zettlr_rows(path: Path, *, mixed: bool) -> list[RawQuery]:
    """A zettlr question file; with `mixed`, each row judged by its `mixed` object where it has one.

    Why: a German page translates an older English version, so in the mixed vault a judged note may
    no longer answer (or a German page answers what its English page does not). The file keeps the
    English vault's judgements as `relevant`/`partial` and the mixed vault's where they differ; a
    question nothing answers in the mixed vault (mixed `relevant` empty) is left out of its cells.
    """
    out = []
    for line in path.read_text(encoding="utf-8").splitlines():
        if not line.strip():
            continue
        row = json.loads(line)
        judged = row.get("mixed", row) if mixed else row
        if judged["relevant"]:
            out.append(RawQuery(row["id"], row["query"], tuple(judged["relevant"]), tuple(judged.get("partial", ())),
                                row.get("category")))
    return out


def mixed_vault(folder: Path, seed: int = MIXED_SEED) -> Path:
    """Copies of the rustbook chapters, half German and half English, drawn once by `seed`.

    The 112 chapter files share their names across `rustbook-de/src` and `rustbook-en/src`, so a
    judgement by file name holds in either language. Rewritten only when missing or different.
    """
    de, en = CORPORA / "rustbook-de/src", CORPORA / "rustbook-en/src"
    names = sorted(p.name for p in en.glob("*.md"))
    german = set(random.Random(seed).sample(names, len(names) // 2))
    folder.mkdir(parents=True, exist_ok=True)
    for name in names:
        src = (de if name in german else en) / name
        dst = folder / name
        text = src.read_bytes()
        if not dst.is_file() or dst.read_bytes() != text:
            dst.write_bytes(text)
    return folder


def corpus_paths(work: Path, xquad_n: int | None) -> dict[str, tuple[Path, Path]]:
    """Corpus key -> (vault folder, store folder); XQuAD vaults are written here as notes."""
    out = {
        "foam": (CORPORA / "foam-docs/vault", work / "foam-docs"),
        "rust-de": (CORPORA / "rustbook-de/src", work / "rustbook-de"),
        "rust-en": (CORPORA / "rustbook-en/src", work / "rustbook-en"),
        "rust-mixed": (work / "rustbook-mixed-vault", work / "rustbook-mixed"),
        "msdocs": (work / "msdocs-slice-vault", work / "msdocs-slice"),
        "zettlr-en": (ZETTLR_DOCS / "en", work / "zettlr-en"),
        "zettlr-mixed": (work / "zettlr-mixed-vault", work / "zettlr-mixed"),
    }
    for lang in ("de", "en"):
        out[f"xquad-{lang}"] = (work / f"xquad-{lang}" / "vault", work / f"xquad-{lang}" / "store")
    return out


@dataclasses.dataclass
class Fetched:
    """One cell's questions with the lists of the real store and of the fixed-window baseline."""

    spec: CellSpec
    structure: object
    """`search.Replay` over the real store."""
    fixed: object
    """`search.Replay` over the fixed-window store."""


def open_corpora(stack: contextlib.ExitStack, work: Path, embedder: Embedder, settings: Settings,
                 needed: set[str], xquad_n: int | None
                 ) -> dict[str, tuple[Searcher, Searcher, dict[str, str] | None]]:
    """Import (incrementally) and open every needed corpus: real searcher, baseline searcher, doc key."""
    paths = corpus_paths(work, xquad_n)
    out: dict[str, tuple[Searcher, Searcher, dict[str, str] | None]] = {}
    for name in sorted(needed):
        vault, store = paths[name]
        key: dict[str, str] | None = None
        if name == "rust-mixed":
            mixed_vault(vault)
        if name == "msdocs":
            msdocs_vault(vault)
        if name == "zettlr-mixed":
            zettlr_mixed_vault(vault)
        if name.startswith("xquad-"):
            key = write_beir_vault(load_beir(CORPORA / "xquad/beir" / name.removeprefix("xquad-")), vault)
        started = time.perf_counter()
        s = dataclasses.replace(settings, store_path=str(store))
        real = stack.enter_context(opened(vault, s, embedder))
        fixed_folder = store.parent / "baseline-fixed" if name.startswith("xquad-") else store / "baseline-fixed"
        base = stack.enter_context(opened_fixed(vault, fixed_folder, s, embedder))
        print(f"  {name}: ready in {time.perf_counter() - started:.0f}s", file=sys.stderr, flush=True)
        out[name] = (real, base, key)
    return out


def cell_queries(spec: CellSpec, searcher: Searcher, xquad_n: int | None,
                 limit: Callable[[object, int | None], object]) -> list[EvalQuery]:
    """The cell's judged questions, keyed as the replay ranks (note id, or BEIR doc id)."""
    if spec.questions.startswith("xquad:"):
        _, asked, searched = spec.questions.split(":")
        root = CORPORA / "xquad/beir"
        data = load_beir(root / searched, queries_from=None if asked == searched else root / asked)
        return beir_queries(limit(data, xquad_n))  # type: ignore[arg-type]
    path = GOLDEN / spec.questions
    raw = zettlr_rows(path, mixed=True) if spec.mixed else load_vault_queries(path)
    if spec.categories:
        raw = [q for q in raw if q.category in spec.categories]
    if spec.exclude:
        raw = [q for q in raw if q.category not in spec.exclude]
    return resolve_queries(raw, searcher.store)


# -- the selection rule and leave-one-out ---------------------------------------------------------


def leximin_key(margins: Sequence[float], mean: float) -> tuple[float, ...]:
    """Sort key (smaller is better): the worst margin first, then the next, then the mean."""
    return (*(-m for m in sorted(margins)), -mean)


def question_margin(score: float, ref: float, size: int | None) -> float:
    """A cell's margin in whole questions (`round((score - ref) * size)`), or raw when its size is unknown.

    Why: a cell's nDCG@5 is a mean over its questions, so a margin below 1/size is less than one
    question's swing. Compared raw, the leximin's worst cell was XQuAD en→en at its ceiling in every
    top setting (+0.004 over BM25's 0.979 with 100 questions) and the folds picked on that noise,
    then lost the Rust cells (34 questions each) by 0.02-0.04; in questions those margins tie and
    the next-worst cell and the mean decide.
    """
    return float(round((score - ref) * size)) if size else score - ref


def pick(scores: dict[int, dict[str, float]], refs: dict[str, float], cells: Sequence[str],
         sizes: Mapping[str, int] | None = None) -> int:
    """The setting (index) the selection rule chooses looking at `cells` only (the first one when none):
    leximin over the margins (in whole questions when `sizes` gives each cell's), then the mean."""
    if not cells:
        return min(scores)
    sizes = sizes or {}

    def key(i: int) -> tuple[float, ...]:
        per = scores[i]
        margins = [question_margin(per[c], refs[c], sizes.get(c)) for c in cells]
        return leximin_key(margins, sum(per[c] for c in cells) / len(cells))

    return min(scores, key=key)


def leave_one_out(scores: dict[int, dict[str, float]], refs: dict[str, float], cells: Sequence[str],
                  sizes: Mapping[str, int] | None = None) -> dict[str, tuple[int, float]]:
    """Per held-out cell: the setting picked on the other cells, and its figure on the held-out one."""
    out = {}
    for held in cells:
        rest = [c for c in cells if c != held]
        i = pick(scores, refs, rest, sizes)
        out[held] = (i, scores[i][held])
    return out


def shared_embedder(work: Path) -> CachedEmbedder:
    """USE with one cache for every corpus: parallel and mixed vaults share most chunk texts."""
    return CachedEmbedder(UseEmbedder(), EmbeddingCache(work / "use-cache.sqlite"))


def base_settings(overrides: dict[str, object] | None = None) -> Settings:
    """The bench's settings: no e5 tier, plus a representation's overrides (`loo --representation`)."""
    return load_settings(overrides={"quality_tier": False, **(overrides or {})})



__all__ = ["CELLS", "HELD_OUT", "MSDOCS_CELLS", "MSDOCS_SLICE", "ZETTLR_CELLS", "ZETTLR_DOCS", "ZETTLR_TRANSLATIONS",
           "CellSpec", "base_settings", "cell_queries", "corpus_paths", "leave_one_out", "mixed_vault",
           "msdocs_slice_notes", "msdocs_vault", "open_corpora", "pick", "shared_embedder", "zettlr_mixed_sources",
           "zettlr_mixed_vault", "zettlr_rows"]
