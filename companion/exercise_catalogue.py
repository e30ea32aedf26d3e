"""The book's exercises, chapter by chapter. Answers call the companion's models.

Add an exercise next to its chapter's others; the notebook shows the question and a hidden
solution, and ``companion.exercises.check(id, answer)`` checks a reader's answer.
"""
from __future__ import annotations

from .exercises import Exercise, register

# --- intro -----------------------------------------------------------------------------------
