"""Chapter exercises whose answers the companion computes and checks.

Each exercise in the book is a ``{exercise}`` block with a hidden ``{solution}`` (sphinx-exercise).
A reader types an answer in a notebook cell, ``check("hardware-ridge", 295)``, and gets a verdict
with the tolerance and the reason. Answers are never typed here: each is a function that asks the
companion's models, so the book and its exercises agree by construction.
"""
from __future__ import annotations

import math
import numbers
from dataclasses import dataclass
from typing import Callable

from . import checks


@dataclass(frozen=True)
class Exercise:
    """One checked exercise. ``answer`` computes the expected value when called."""
    id: str
    chapter: str
    question: str
    answer: Callable[[], object]
    why: str
    rel_tol: float = 0.02
    abs_tol: float = 0.0
    unit: str = ""


@dataclass(frozen=True)
class Verdict:
    """The result of :func:`check`; prints as a sentence in a notebook."""
    exercise_id: str
    correct: bool
    message: str

    def __bool__(self) -> bool:
        return self.correct

    def __str__(self) -> str:
        return self.message

    def _repr_markdown_(self) -> str:
        return ("✅ " if self.correct else "❌ ") + self.message

    __repr__ = __str__


_REGISTRY: dict[str, Exercise] = {}


def register(exercise: Exercise) -> Exercise:
    """Add an exercise to the catalogue (ids are unique)."""
    if exercise.id in _REGISTRY and _REGISTRY[exercise.id] != exercise:
        raise ValueError(f"exercise id {exercise.id!r} is already registered")
    _REGISTRY[exercise.id] = exercise
    return exercise


def _load_catalogue() -> None:
    # Chapter catalogues register themselves on import; importing here keeps exercises.py free
    # of model code and avoids import cycles (catalogue -> models, never models -> catalogue).
    from .catalogue import load_all
    load_all()


def exercises(chapter: str | None = None) -> list[Exercise]:
    """Every registered exercise, optionally of one chapter."""
    _load_catalogue()
    return [e for e in _REGISTRY.values() if chapter is None or e.chapter == chapter]


def get(exercise_id: str) -> Exercise:
    """The exercise called ``exercise_id`` (unknown ids get close matches suggested)."""
    _load_catalogue()
    checks.choice("exercise_id", exercise_id, list(_REGISTRY))
    return _REGISTRY[exercise_id]


def _fmt(x) -> str:
    return f"{x:.4g}" if isinstance(x, numbers.Real) and not isinstance(x, bool) else repr(x)


def _tolerance(ex: Exercise, unit: str) -> str:
    """The accepted band in words: "within 2%", "within 2% or 0.5 ms", or "" for exact answers."""
    parts = ([f"{ex.rel_tol:.0%}"] if ex.rel_tol else []) + (
        [f"{_fmt(ex.abs_tol)}{unit}"] if ex.abs_tol else [])
    return f"within {' or '.join(parts)}" if parts else ""


def check(exercise_id: str, answer, *, reveal: bool = False) -> Verdict:
    """Is ``answer`` right? Numbers pass within the exercise's stated tolerance.

    A wrong number is told whether it is too high or too low and by what factor, plus the method
    (``why``); ``reveal=True`` also prints the expected value.
    """
    ex = get(exercise_id)
    checks.boolean("reveal", reveal)
    answer = checks.scalar(answer)  # a numpy scalar or 0-d array counts as its number
    expected = ex.answer()
    unit = f" {ex.unit}" if ex.unit else ""
    tol = _tolerance(ex, unit)
    shown = f" Expected {_fmt(expected)}{unit}." if reveal else ""
    if isinstance(expected, numbers.Real) and not isinstance(expected, bool):
        if isinstance(answer, bool) or not isinstance(answer, numbers.Real):
            raise TypeError(f"answer to {exercise_id!r} must be a number{unit and ' in' + unit}; "
                            f"got {type(answer).__name__}")
        answer = checks.number("answer", answer)  # finite, and not too large for a float
        ok = math.isclose(float(answer), float(expected), rel_tol=ex.rel_tol, abs_tol=ex.abs_tol)
        if ok:
            return Verdict(ex.id, True, f"Right: {_fmt(answer)}{unit} is {tol + ' of ' if tol else ''}the answer. {ex.why}")
        if expected != 0 and answer != 0 and (answer > 0) == (expected > 0):
            ratio = float(answer) / float(expected)
            how = f"too {'high' if ratio > 1 else 'low'} by a factor of {max(ratio, 1 / ratio):.3g}"
        else:
            how = "off (check the sign and the units)"
        return Verdict(ex.id, False, f"Not yet: {_fmt(answer)}{unit} is {how}; the check "
                       f"accepts {'answers ' + tol if tol else 'only the exact answer'}.{shown} Hint: {ex.why}")
    ok = (str(answer).strip().lower() == str(expected).strip().lower()
          if isinstance(expected, str) else answer == expected)
    if ok:
        return Verdict(ex.id, True, f"Right. {ex.why}")
    return Verdict(ex.id, False, f"Not yet: {answer!r} is not the answer.{shown} Hint: {ex.why}")
