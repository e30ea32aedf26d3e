"""Exercises of the introduction."""
from .. import roofline
from ..exercises import Exercise, register


def _idle_slots(m, n, gpu):
    q = roofline.gemm_efficiency(m, n, gpu)
    return q.waves * q.sm_count - q.tiles


register(Exercise(
    id="intro-last-wave",
    chapter="intro",
    question="A 4096 x 4096 output is computed in 128 x 128 tiles, one tile per SM at a time, on "
             "an H100 SXM. How many SM slots sit idle in the last wave?",
    answer=lambda: _idle_slots(4096, 4096, "H100 SXM"),
    why="Tiles = (4096/128)^2; waves = ceil(tiles / SMs); idle = waves x SMs - tiles.",
    rel_tol=0.0, abs_tol=0.0, unit="SM slots"))
