"""`bench/search.py loo-table --joint`: (representation, setting) chosen together (issue 15).

What the merge must guarantee for its figures to mean anything: every margin is over the *base*
representation's singles, so a representation that weakens its own single lists cannot lower
its bar; the union holds every representation's settings under its own label; "before" is the
base with today's grid only, whatever else the base file replayed.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

sys.path.insert(0, str(Path(__file__).parents[1] / "bench"))

import search as bench  # bench/search.py: bench is a folder of scripts, not a package

CELLS = ("a", "b", "c")
TODAY = bench._tuning_label(bench.loo_tunings()[0])
EXTRA = "an extra setting of the joint grid"


def _file(rep: str, singles: dict[str, float], hybrid: dict[str, dict[str, float]]) -> dict:  # type: ignore[type-arg]
    single = {s: singles.get(s, 0.0) for s in bench.SINGLES}
    return {"representation": rep, "cells": list(CELLS), "sizes": dict.fromkeys(CELLS, 10),
            "singles": {c: dict(single) for c in CELLS}, "choices": {"hybrid": hybrid}, "default": TODAY}


SCORES = st.floats(0.0, 1.0, allow_nan=False)
PER_CELL = st.fixed_dictionaries({c: SCORES for c in CELLS})


@settings(max_examples=60, deadline=None)
@given(base_today=PER_CELL, base_extra=PER_CELL, other=PER_CELL, base_bm25=SCORES, other_bm25=SCORES)
def test_the_yardstick_is_the_base_singles_and_before_is_todays_grid(
        base_today: dict[str, float], base_extra: dict[str, float], other: dict[str, float],
        base_bm25: float, other_bm25: float) -> None:
    j = bench.joint_results([
        _file("base", {"bm25": base_bm25, "dense": 0.5}, {TODAY: base_today, EXTRA: base_extra}),
        _file("bm25m", {"bm25": other_bm25, "dense": 0.1}, {TODAY: other}),
    ])
    assert j["refs"] == dict.fromkeys(CELLS, max(base_bm25, 0.5))  # never the other representation's singles
    assert set(j["after"]) == {f"base | {TODAY}", f"base | {EXTRA}", f"bm25m | {TODAY}"}
    assert j["after"][f"bm25m | {TODAY}"] == other
    assert j["before"] == {TODAY: base_today}  # the extra setting is not today's grid
    held, _ = bench.held_and_inside(j["after"], j["refs"], CELLS)
    before, _ = bench.held_and_inside(j["before"], j["refs"], CELLS)
    for cell in CELLS:  # each fold's figure is the held-out cell's score of the label it picked
        label, value = held[cell]
        assert value == j["after"][label][cell]
        assert before[cell] == (TODAY, base_today[cell])


def test_a_representation_that_wins_everywhere_is_picked_in_every_fold() -> None:
    j = bench.joint_results([_file("base", {"dense": 0.5}, {TODAY: dict.fromkeys(CELLS, 0.6)}),
                             _file("dnt60", {"dense": 0.9}, {TODAY: dict.fromkeys(CELLS, 0.7)})])
    held, inside = bench.held_and_inside(j["after"], j["refs"], CELLS)
    assert inside == f"dnt60 | {TODAY}"
    assert all(label == inside and value == 0.7 for label, value in held.values())


def test_files_split_by_cells_merge_per_representation_and_base_is_required() -> None:
    half = _file("base", {"dense": 0.5}, {TODAY: {"a": 0.6}})
    half.update(cells=["a"], sizes={"a": 10}, singles={"a": half["singles"]["a"]})
    rest = _file("base", {"dense": 0.5}, {TODAY: {"b": 0.7, "c": 0.8}})
    rest.update(cells=["b", "c"], sizes={"b": 10, "c": 10}, singles={c: rest["singles"][c] for c in ("b", "c")})
    j = bench.joint_results([half, rest])
    assert j["cells"] == ["a", "b", "c"] and j["after"] == {f"base | {TODAY}": {"a": 0.6, "b": 0.7, "c": 0.8}}
    with pytest.raises(ValueError, match="needs the 'base'"):
        bench.joint_results([_file("dnt60", {}, {TODAY: dict.fromkeys(CELLS, 0.5)})])
    with pytest.raises(ValueError, match="covers"):
        bench.joint_results([_file("base", {}, {TODAY: dict.fromkeys(CELLS, 0.5)}), half | {"representation": "x"}])


def test_the_joint_grid_holds_todays_grid_and_stays_small() -> None:
    today, joint = bench.loo_tunings(), bench.joint_tunings()
    assert joint[:len(today)] == today and len(joint) <= 300
    assert any(t.note_sum_weight == 0.0 and t.language_slots and t.title_weight > 0 for t in joint)
    assert set(bench.REPRESENTATIONS) == {"base", "dnt60", "engine", "engine+strict", "engine+dnt60",
                                           "win8", "win64"}
    assert bench.REPRESENTATIONS["base"] == {}  # today's default, whatever it is, is the yardstick


def test_margins_below_one_question_do_not_decide_the_pick() -> None:
    """The rule counts margins in whole questions: on a 100-question cell +0.001 and +0.004 are
    both less than one question, so the 10-question cell, where one setting is a question ahead,
    decides; compared raw, the noise on the big cell would."""
    import cells

    scores = {0: {"big": 0.901, "small": 0.9}, 1: {"big": 0.904, "small": 0.8}}
    refs = {"big": 0.9, "small": 0.7}
    sizes = {"big": 100, "small": 10}
    assert cells.pick(scores, refs, ["big", "small"]) == 1
    assert cells.pick(scores, refs, ["big", "small"], sizes) == 0
    assert cells.question_margin(0.904, 0.9, 100) == 0.0 and cells.question_margin(0.9, 0.7, 10) == 2.0
    held = cells.leave_one_out(scores, refs, ["big", "small"], sizes)
    assert held["small"] == (1, 0.8)  # on "big" alone the two tie in questions; the mean decides
