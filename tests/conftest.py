"""Shared test helpers."""
import math

import pytest

from companion.exercises import check, exercises, get


def _against_sources(chapter: str, sourced: dict) -> None:
    """Every exercise of ``chapter`` is pinned by a value worked from its documents.

    ``sourced`` maps each exercise id to the value a reader gets by working the question from
    the cited documents (a number or a word), or to a ``(low, high)`` range the documents bound
    a model-computed answer to. An exercise without an entry fails (so a new one needs its
    source), an answer outside its exercise's tolerance of the sourced value fails, and twice
    the sourced value must be rejected: the test cannot pass by comparing an answer with
    itself.
    """
    ids = [e.id for e in exercises(chapter)]
    assert len(ids) >= 5, chapter
    missing = sorted(set(ids) - set(sourced))
    assert not missing, f"exercises with no sourced value in the test: {missing}"
    for i in ids:
        ex, expected = get(i), sourced[i]
        answer = ex.answer()
        if isinstance(expected, tuple):
            low, high = expected
            assert low <= answer <= high, (i, answer, expected)
            continue
        if isinstance(expected, str):
            assert check(i, expected) and not check(i, expected + "x"), i
            continue
        assert math.isclose(answer, expected, rel_tol=max(ex.rel_tol, 1e-9),
                            abs_tol=ex.abs_tol), (i, answer, expected)
        if expected:
            assert not check(i, 2 * expected), i


@pytest.fixture
def against_sources():
    return _against_sources
