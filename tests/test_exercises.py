"""Exercise checking: right within tolerance, wrong with direction, clear errors."""
import math

import pytest

from companion import exercises, roofline
from companion.exercises import Exercise, check, register


register(Exercise(id="test-ratio", chapter="test", question="?", answer=lambda: 2.0,
                  why="because", rel_tol=0.05, unit="x"))
register(Exercise(id="test-word", chapter="test", question="?", answer=lambda: "ring",
                  why="rings", rel_tol=0))


def test_within_tolerance():
    assert check("test-ratio", 2.09)
    assert "within 5%" in str(check("test-ratio", 2.09))
    assert not check("test-ratio", 2.2)


def test_wrong_answer_says_direction_not_value():
    v = check("test-ratio", 4.0)
    assert "too high by a factor of 2" in str(v) and "Expected" not in str(v)
    assert "Expected 2" in str(check("test-ratio", 4.0, reveal=True))


def test_string_answers_ignore_case():
    assert check("test-word", " Ring ") and not check("test-word", "tree")


def test_intro_exercise_answer_from_the_model():
    # 4096/128 = 32 tiles per side: 1024 tiles over the H100's 132 SMs (NVIDIA H100 whitepaper):
    # ceil(1024/132) = 8 waves, 8*132 - 1024 = 32 idle slots.
    assert check("intro-last-wave", 32) and not check("intro-last-wave", 31)
    assert roofline.gemm_efficiency(4096, 4096, "H100 SXM").sm_count == 132


def test_every_registered_answer_is_computable():
    for ex in exercises.exercises():
        a = ex.answer()
        if isinstance(a, float):
            assert math.isfinite(a), ex.id
        assert check(ex.id, a), ex.id


def test_errors():
    with pytest.raises(ValueError, match="test-ratio"):
        check("test-rati", 1)
    with pytest.raises(TypeError, match="number"):
        check("test-ratio", "two")
    with pytest.raises(ValueError, match="finite"):
        check("test-ratio", float("nan"))
    with pytest.raises(ValueError, match="already registered"):
        register(Exercise(id="test-ratio", chapter="t", question="", answer=lambda: 3, why=""))


def test_exact_answers_say_so():
    # intro-last-wave has rel_tol = abs_tol = 0: the message must not end in "accepts answers ."
    wrong, right = str(check("intro-last-wave", 0)), str(check("intro-last-wave", 32))
    assert "accepts only the exact answer." in wrong and "answers ." not in wrong
    assert right.startswith("Right: 32") and "the answer." in right and " of the" not in right
    assert "accepts answers within 5%." in str(check("test-ratio", 4.0))
