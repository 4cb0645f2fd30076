"""Search results unchanged: every golden question's hit list, recorded from one checkout and compared.

A start-up or import change must not change what search returns (issue 26: "the same hits on every
golden question before and after"). This script imports the foam-docs and rustbook-de golden vaults
into fresh stores under `--work` (never into the repo or the corpora), optionally fills the e5 tier,
asks every question of `bench/golden/<set>.jsonl` in each mode (and, hybrid and by note, once more as a
one-off `mindnet search` asks it: a short-lived index), and writes the hit lists, plus every stored chunk's
language and a digest of its vectors, as JSON:

```sh
# before: main's code (PYTHONPATH wins over the editable install), stores of its own
PYTHONPATH=/work/main/src nice -n 10 .venv/bin/python bench/golden_hits.py record --work /tmp/gh-before \\
    --out /tmp/gh-before.json --e5
# after: this checkout, fresh stores (no embedding cache shared with the first run)
nice -n 10 .venv/bin/python bench/golden_hits.py record --work /tmp/gh-after --out /tmp/gh-after.json --e5
.venv/bin/python bench/golden_hits.py compare /tmp/gh-before.json /tmp/gh-after.json
```

`compare` prints how many questions, hits, chunk languages and vectors differ, and exits 1 if any do.
Scores are compared exactly (they come from the same vectors); a differing list is printed whole.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

from _common import CORPORA

GOLDEN = Path(__file__).parent / "golden"
SETS = {"foam-docs": CORPORA / "foam-docs" / "vault", "rustbook-de": CORPORA / "rustbook-de" / "src"}
MODES = ("hybrid", "dense", "lexical")


def _questions(name: str) -> list[str]:
    lines = (GOLDEN / f"{name}.jsonl").read_text(encoding="utf-8").splitlines()
    return [json.loads(line)["query"] for line in lines if line.strip()]


def _stored(index: Any) -> dict[str, Any]:
    """Every chunk's language and a digest of its named vectors (what the import wrote)."""
    langs: dict[str, str] = {}
    digest = hashlib.sha256()
    for point in sorted(index.store().scroll("chunks", with_vectors=True), key=lambda p: p.id):
        langs[point.id] = str(point.payload.get("lang"))
        for name in sorted(point.vectors):
            digest.update(f"{point.id}/{name}".encode())
            digest.update(np.asarray(point.vectors[name], dtype=np.float32).tobytes())
    return {"languages": langs, "vectors": digest.hexdigest()}


def record(work: Path, e5: bool) -> dict[str, Any]:
    """Import both golden vaults into `work`, ask every question, return hits and stored records."""
    import mindnet
    from mindnet import Index, load_settings

    out: dict[str, Any] = {"mindnet": mindnet.__file__, "sets": {}}
    for name, vault in SETS.items():
        settings = load_settings(vault, overrides={"store_path": str(work / name), "quality_tier": False})
        with Index(vault, settings) as index:
            started = time.perf_counter()
            index.import_vault(e5=False)
            if e5:
                index.fill_e5()
            print(f"{name}: imported{' + e5' if e5 else ''} in {time.perf_counter() - started:.1f} s", file=sys.stderr)
            hits: dict[str, list[list[Any]]] = {}
            for question in _questions(name):
                for mode in MODES:
                    found = index.search(question, k=10, mode=mode)
                    hits[f"{mode}\t{question}"] = [[h.chunk_id, h.score] for h in found]
                found = index.search(question, k=10, by_note=True)
                hits[f"by_note\t{question}"] = [[h.note_id, h.score] for h in found]
            stored = _stored(index)
        hits.update(_one_off_hits(vault, settings, name))
        out["sets"][name] = {"hits": hits, **stored}
    return out


def _one_off_hits(vault: Path, settings: Any, name: str) -> dict[str, list[list[Any]]]:
    """Every question's hybrid and by-note hits as a one-off `mindnet search` gets them: a short-lived
    index, opened after another one-off index kept the note names beside the store (issue 26)."""
    from mindnet import Index

    with Index(vault, settings, short_lived=True) as first:
        first.prepare_search()
    hits: dict[str, list[list[Any]]] = {}
    with Index(vault, settings, short_lived=True) as once:
        for question in _questions(name):
            found = once.search(question, k=10, mode="hybrid")
            hits[f"one-off hybrid\t{question}"] = [[h.chunk_id, h.score] for h in found]
            found = once.search(question, k=10, by_note=True)
            hits[f"one-off by_note\t{question}"] = [[h.note_id, h.score] for h in found]
    return hits


def compare(before: dict[str, Any], after: dict[str, Any]) -> int:
    """Print the differences; the number of differing items."""
    differing = 0
    for name, old in before["sets"].items():
        new = after["sets"].get(name)
        if new is None:
            print(f"{name}: missing in the second file")
            differing += 1
            continue
        lists = [key for key in old["hits"] if old["hits"][key] != new["hits"].get(key)]
        ids = [key for key in old["hits"]
               if [h[0] for h in old["hits"][key]] != [h[0] for h in new["hits"].get(key, [])]]
        langs = [cid for cid, lang in old["languages"].items() if new["languages"].get(cid) != lang]
        langs += [cid for cid in new["languages"] if cid not in old["languages"]]
        vectors = old["vectors"] != new["vectors"]
        print(f"{name}: {len(old['hits'])} searches, {len(ids)} differ in hits, {len(lists)} in hits or scores; "
              f"{len(old['languages'])} chunks, {len(langs)} differ in language; vectors "
              f"{'differ' if vectors else 'identical'}")
        for key in lists[:10]:
            print(f"  {key!r}\n    before {old['hits'][key]}\n    after  {new['hits'].get(key)}")
        differing += len(lists) + len(langs) + int(vectors)
    return differing


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    rec = sub.add_parser("record", help="import the golden vaults and write every question's hits")
    rec.add_argument("--work", type=Path, required=True, help="folder for the stores (created; outside the repo)")
    rec.add_argument("--out", type=Path, required=True)
    rec.add_argument("--e5", action="store_true", help="fill the e5 tier before asking")
    cmp = sub.add_parser("compare", help="compare two recordings")
    cmp.add_argument("before", type=Path)
    cmp.add_argument("after", type=Path)
    args = parser.parse_args()
    if args.command == "record":
        args.work.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(record(args.work, args.e5)), encoding="utf-8")
        return
    before, after = (json.loads(p.read_text(encoding="utf-8")) for p in (args.before, args.after))
    sys.exit(1 if compare(before, after) else 0)


if __name__ == "__main__":
    main()
