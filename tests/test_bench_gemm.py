"""The GEMM bench on CPU (quick mode, as CI runs it) and its record."""
import math
import time

import pytest

pytest.importorskip("torch")

from companion.bench import gemm, record  # noqa: E402


def test_quick_cpu_run_is_fast_and_sane():
    t0 = time.perf_counter()
    results = gemm.run(device="cpu", quick=True)
    assert time.perf_counter() - t0 < 15
    assert {r["dtype"] for r in results} == {"fp32", "bf16"}
    for r in results:
        assert r["status"] == "ok"
        assert r["work_flop"] == 2 * r["m"] * r["n"] * r["k"]
        assert 0 < r["best_s"] <= r["median_s"] < 10
        # a 2-core CPU does between 1 MFLOP/s and 10 TFLOP/s: positive, finite, plausible
        assert 1e6 < r["median_flops"] < 1e13 and math.isclose(
            r["median_flops"], r["work_flop"] / r["median_s"])


def test_save_writes_a_record(tmp_path, capsys):
    assert gemm.main(["--device", "cpu", "--quick", "--dtypes", "fp32", "--shapes", "128x64x32",
                      "--save", "--out", str(tmp_path)]) == 0
    recs = record.load_records(kind="gemm", directory=tmp_path)
    assert len(recs) == 1
    rec = recs[0]
    assert rec["results"][0]["m"] == 128 and rec["results"][0]["k"] == 32
    assert rec["meta"]["settings"]["quick"] is True and "torch" in rec["meta"]
    assert "saved" in capsys.readouterr().out


def test_unsupported_cases_are_reported_not_hidden():
    res = gemm.run(["fp8_e4m3"], [(64, 64, 64)], device="cpu", warmup=0, iters=1)
    assert res[0]["status"] == "skipped" and "CPU" in res[0]["reason"]


def test_bad_arguments():
    with pytest.raises(ValueError, match="MxNxK"):
        gemm.parse_shapes("64x64")
    with pytest.raises(ValueError, match="fp8_e4m3"):
        gemm.run(["fp8"], device="cpu")
    with pytest.raises(SystemExit) as exit_:  # argparse: exit 2 with one line naming the flag
        gemm.main(["--device", "cpu", "--dtypes", "int8", "--quick"])
    assert exit_.value.code == 2
    import torch
    if not torch.cuda.is_available():
        with pytest.raises(ValueError, match="CUDA"):
            gemm.run(device="cuda")
