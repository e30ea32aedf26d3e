"""companion.bench.power: the summary arithmetic, and a clear refusal without a GPU."""
import pytest

pytest.importorskip("torch")
import torch  # noqa: E402

from companion.__main__ import main  # noqa: E402
from companion.bench import power as P  # noqa: E402


def test_summary_drops_the_ramp_and_divides_work_by_energy():
    # 2 s of ramp at 300 W, then 700 W: the median after 2 s is 700 W
    samples = [(0.1 * i, 300.0 if i < 20 else 700.0) for i in range(100)]
    s = P.summarize(samples, work_flop=2 * 8192**3, calls=1000, elapsed_s=10.0, settle_s=2.0)
    assert s["samples"] == 80 and s["median_w"] == 700.0 and s["max_w"] == 700.0
    assert s["flops"] == pytest.approx(1000 * 2 * 8192**3 / 10.0)
    assert s["flop_per_joule"] == pytest.approx(s["flops"] / 700.0)


def test_summary_needs_samples_after_the_ramp():
    with pytest.raises(ValueError, match="settle_s"):
        P.summarize([(0.5, 400.0)], work_flop=1.0, calls=1, elapsed_s=1.0, settle_s=2.0)


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the no-GPU path")
def test_without_a_gpu_it_says_why(capsys):
    with pytest.raises(ValueError, match="NVIDIA GPU"):
        P.run()
    assert main(["bench", "power"]) == 2
    assert "NVIDIA GPU" in capsys.readouterr().err
