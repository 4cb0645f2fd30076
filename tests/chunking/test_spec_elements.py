"""SPEC R5 inside containers, R7 heading runs and R9 long lists, each checked against the SPEC text.

- R5: "fenced code stays verbatim" holds wherever the fence sits: in a quote, a callout, a list
  item, or any nesting of them (issue 13, finding 7).
- R7: "A heading with no text of its own before the next heading (`## A` directly followed by
  `### B`) opens the next chunk instead of forming a chunk of a few tokens; that chunk's
  `section_path` is the deeper one (`/A/B`)."
- R9: "a list that does not fit the chunk is cut into blocks of 5-8 items (a shorter block only at
  the list's end), while a list that fits stays whole".
"""

from __future__ import annotations

import re

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fakes import make_note
from mindnet.chunking.pipeline import chunk_note
from mindnet.chunking.structure import chunk_structure
from mindnet.chunking.tokens import default_tokenizer
from mindnet.config import DEFAULT_PROFILES, DEFAULT_STOP_SECTIONS, Settings

TOK = default_tokenizer()
DEFAULT = DEFAULT_PROFILES["default"]

# --- R5: fenced code inside containers ----------------------------------------------------------

CONTAINERS = {
    "quote": ("> ", "> "),
    "callout": ("> ", "> "),
    "bullet": ("- ", "  "),
    "ordered": ("1. ", "   "),
    "indented bullet": ("  - ", "    "),
}
"""Container kind -> (marker of its first line, prefix of its continuation lines)."""

code_char = st.characters(
    codec="utf-8", exclude_categories=("Cs", "Cc"), exclude_characters="`~\u2028\u2029\x85"
) | st.sampled_from(["Ｔ", "ﬁ", "²", "\u00a0", "  ", "\t", "%%", "x = 1   "])
code_line = st.lists(code_char, max_size=12).map("".join)


def _nest(kinds: list[str], code: list[str]) -> tuple[str, list[str]]:
    """A note body with a fence nested in `kinds` (outermost first), and the fence's inner lines as written."""
    first, rest = "", ""
    for kind in kinds:
        marker, cont = CONTAINERS[kind]
        first, rest = rest + marker, rest + cont
    lead = []
    if kinds[-1] == "callout":
        lead = [f"{first}[!note] Hinweis", f"{rest}Der Befehl lautet so:", rest.rstrip()]
        first = rest
    elif kinds[-1] in ("bullet", "ordered", "indented bullet"):
        lead = [f"{first}Schritt eins, mit diesem Befehl:", rest.rstrip()]
        first = rest
    inner = [f"{rest}{line}" for line in code]
    lines = ["Ein Absatz vor dem Block.", "", *lead, f"{first}```python", *inner, f"{rest}```", "", "Danach."]
    return "\n".join(lines) + "\n", inner


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    kinds=st.lists(st.sampled_from(list(CONTAINERS)), min_size=1, max_size=3),
    code=st.lists(code_line, min_size=1, max_size=6),
)
def test_r5_fenced_code_in_nested_containers_stays_verbatim(kinds: list[str], code: list[str]) -> None:
    body, inner = _nest(kinds, code)
    chunks = chunk_note(make_note("n.md", body), Settings())
    verbatim = "".join(f"{line}\n" for line in inner)
    assert any(verbatim in chunk.text + "\n" for chunk in chunks), (body, [c.text for c in chunks])


def test_r5_a_quoted_fence_keeps_its_trailing_spaces_and_width() -> None:
    body = "> [!example] Code\n> ```\n> x = 'Ｔ'   \n> ```\n\n- Schritt:\n\n  ```sh\n  echo ﬁ  \n  ```\n"
    text = "\n".join(chunk.text for chunk in chunk_note(make_note("n.md", body), Settings()))
    assert "> x = 'Ｔ'   \n" in text
    assert "  echo ﬁ  \n" in text


# --- R7: heading runs ---------------------------------------------------------------------------

SENTENCE = "Die Notizen werden jede Nacht importiert und danach im Index geprüft."


def test_r7_a_heading_without_text_opens_the_next_chunk_with_the_deeper_path() -> None:
    body = f"# Titel\n\n{SENTENCE}\n\n## A\n\n### B\n\n{SENTENCE}\n\n## C\n\n{SENTENCE}\n"
    spans = chunk_structure(body, DEFAULT, stop_sections=DEFAULT_STOP_SECTIONS, tokenizer=TOK)
    assert [s.section_path for s in spans] == ["/", "/A/B", "/C"]
    assert [body[s.char_start : s.char_end].split("\n", 1)[0] for s in spans] == ["# Titel", "## A", "## C"]
    assert spans[1].section_title == "B"
    # every H2/H3 starts a chunk's text (here: `## A` starts the chunk that `### B` belongs to)
    assert all(body.index(h) in [s.char_start for s in spans] for h in ("## A", "## C"))


# --- R9: long lists -----------------------------------------------------------------------------


ITEM_SENTENCE = "Die Einstellung wird für jedes Team einzeln geprüft und gespeichert."


def _item(i: int, sentences: int) -> str:
    return f"- Punkt {i}: " + " ".join([ITEM_SENTENCE] * sentences)


def _items_per_chunk(body: str, spans: list) -> list[int]:
    """Items whose marker lies in each chunk's new content (overlap carried over is not counted)."""
    return [len(re.findall(r"^- Punkt", body[s.content_start : s.char_end], re.M)) for s in spans]


def _in_blocks_of_5_to_8(n: int) -> bool:
    """Whether n items can be n whole blocks of 5-8 items each."""
    return any(5 * k <= n <= 8 * k for k in range(1, n // 5 + 1))


@pytest.mark.parametrize(("count", "sentences"), [(11, 3), (11, 4), (23, 2), (23, 3), (40, 1), (40, 2)])
def test_r9_a_list_that_does_not_fit_is_cut_into_blocks_of_5_to_8_items(count: int, sentences: int) -> None:
    body = "Die Liste der Schritte:\n\n" + "\n".join(_item(i, sentences) for i in range(count)) + "\n"
    assert TOK.count(body) > DEFAULT.max  # the list does not fit one chunk
    spans = chunk_structure(body, DEFAULT, stop_sections=DEFAULT_STOP_SECTIONS, tokenizer=TOK)
    sizes = _items_per_chunk(body, spans)
    assert sum(sizes) == count and len(spans) > 1
    # every cut falls between blocks of 5-8 items; only the list's last block may be shorter
    assert all(_in_blocks_of_5_to_8(n) for n in sizes[:-1]), sizes
    assert sizes[-1] >= 1
    for s in spans:  # whole items: every chunk's new content starts at an item (or the intro)
        assert body[s.content_start :].startswith(("- Punkt", "Die Liste"))


def test_r9_a_list_that_fits_stays_whole() -> None:
    body = "Die Liste der Schritte:\n\n" + "\n".join(_item(i, 2) for i in range(4)) + "\n"
    spans = chunk_structure(body, DEFAULT, stop_sections=DEFAULT_STOP_SECTIONS, tokenizer=TOK)
    assert _items_per_chunk(body, spans) == [4]
