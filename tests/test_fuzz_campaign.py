"""Findings of the hostile-input campaign against the real entry points (mindnet-chunk, import, serve).

Each test is the smallest input that broke an entry point, run against the module that owned the bug.
`pytest.mark.timeout` is a tripwire for super-linear work (minutes before the fix, about a second
after), not a speed assertion.
"""

from __future__ import annotations

import pytest

from mindnet.chunking import sentences
from mindnet.chunking.sentences import sentence_spans


@pytest.mark.timeout(60)
def test_sentence_split_is_linear_in_many_links_on_one_line() -> None:
    text = "[[n]] " * 100_000  # each link rescanned the rest of its line: mindnet-chunk ran > 60 s
    spans = sentences._wikilink_spans(text)
    assert len(spans) == 100_000 and spans[-1] == (len(text) - 6, len(text) - 1)
    assert sentence_spans(text, "en")[-1][1] == len(text.rstrip())
