"""Hostile input against what `mindnet serve`, the MCP tools and the page call: each test is a finding of the
campaign against the resident server (dates the store cannot parse, unbounded queries, oversized bodies,
foreign origins), kept so the fix stays.
"""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mindnet import MindnetError, SearchFilters
from mindnet.store.embedded import _edge_filter

DATE_LIKE = st.from_regex(
    r"\A\d{4}-\d{1,2}-\d{1,2}([T t]\d{2}(:\d{2}(:\d{2}([.,]\d{1,9})?)?)?)?([Zz]|[+-]\d{2}(:?\d{2})?)?\Z")


# -- dates: the store's parser is the judge of what `check_date` lets through ----------------------------------


@given(st.one_of(DATE_LIKE, st.text(max_size=40)), st.booleans())
def test_a_date_bound_is_refused_in_words_or_parsed_by_the_store(value: str, upper: bool) -> None:
    """`from=yesterday` was a 500 (fixed on main by `check_date`); no other spelling may reach Edge's parser."""
    try:
        filters = SearchFilters(created_to=value) if upper else SearchFilters(created_from=value)
    except MindnetError as exc:
        assert "needs an ISO date" in str(exc) and repr(value) in str(exc)
        return
    flt = filters.to_filter()
    if flt is not None:
        _edge_filter(flt)  # Qdrant Edge's own parser: raised ValueError for `yesterday`, `20240101`, `2024-13-45`
