"""companion.bench.bandwidth: byte counting, a quick CPU run, and records that survive a crash."""
import json

import pytest

from companion.bench import bandwidth as bw
from companion.bench import record

KIB, MIB = 1024, 1024 ** 2


@pytest.mark.parametrize("backend", ["torch", "numpy"])
def test_small_cpu_run_counts_bytes_the_stream_way(backend):
    res = bw.run("cpu", sizes=[64 * KIB, 4 * MIB], reps=2, target_s=0.002, backend=backend)
    assert len(res) == 2 * len(bw.KERNELS)
    # STREAM (McCalpin): copy and scale touch 2 arrays, triad 3, a reduction 1
    for r in res:
        assert r["bytes_per_call"] == {"copy": 2, "scale": 2, "triad": 3, "read": 1}[
            r["kernel"]] * r["array_bytes"]
        assert r["best_s"] <= r["median_s"]
        assert r["best_Bps"] == pytest.approx(r["bytes_per_call"] / r["best_s"])
        assert 1e6 < r["best_Bps"] < 1e13  # between 1 MB/s and 10 TB/s on any CPU
        assert r["backend"] == backend and r["device"] == "cpu"


def test_kernels_compute_what_they_claim():
    fns = bw._numpy_kernels(100_000, "float64")  # a = 1, b = 2, c = 0.5 before any call
    fns["triad"]()  # a = b + 3c = 3.5, in L2-sized chunks
    assert fns["read"]() == pytest.approx(3.5 * 100_000)
    assert fns["scale"]()[-1] == pytest.approx(10.5)  # b = 3a
    t = bw._torch_kernels(1000, "float32", "cpu")
    t["triad"]()
    assert float(t["read"]()) == pytest.approx(3500)
    assert float(t["copy"]()[0]) == pytest.approx(3.5)  # b = a


def test_quick_main_saves_one_record(tmp_path, capsys):
    assert bw.main(["--quick", "--device", "cpu", "--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "STREAM" in out and "GB/s" in out and "saved" in out
    recs = record.load_records("bandwidth", tmp_path)
    assert len(recs) == 1
    rec = recs[0]
    assert rec["meta"]["convention"] == bw.CONVENTION and rec["meta"]["settings"]["quick"]
    assert {r["kernel"] for r in rec["results"]} == set(bw.KERNELS)
    sizes = sorted({r["array_bytes"] for r in rec["results"]})
    assert len(sizes) >= 3 and sizes[-1] > max(bw.cpu_caches().values(), default=0)


def test_interrupted_save_leaves_earlier_records_intact(tmp_path, monkeypatch):
    first = bw.save([{"kernel": "copy", "best_Bps": 1.0}], "cpu", {"quick": True}, tmp_path)
    before = first.read_bytes()

    def killed(fd):  # the process dies after writing the body, before the record is linked
        raise KeyboardInterrupt

    monkeypatch.setattr(record.os, "fsync", killed)
    with pytest.raises(KeyboardInterrupt):
        bw.save([{"kernel": "copy", "best_Bps": 2.0}], "cpu", {"quick": True}, tmp_path)
    monkeypatch.undo()
    assert first.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == [first.name]  # no partial file
    assert json.loads(before)["results"][0]["best_Bps"] == 1.0
    assert len(record.load_records("bandwidth", tmp_path)) == 1


def test_run_killed_midway_writes_nothing(tmp_path, monkeypatch):
    bw.save([{"kernel": "read"}], "cpu", {}, tmp_path)
    calls = {"n": 0}
    real = bw._time_calls

    def dies_on_third(*args, **kwargs):
        calls["n"] += 1
        if calls["n"] == 3:
            raise KeyboardInterrupt
        return real(*args, **kwargs)

    monkeypatch.setattr(bw, "_time_calls", dies_on_third)
    with pytest.raises(KeyboardInterrupt):
        bw.main(["--sizes", "64K", "--device", "cpu", "--out", str(tmp_path)])
    assert len(list(tmp_path.iterdir())) == 1


def test_sizes_parse_and_sweep():
    assert bw._parse_size("64K") == 64 * KIB and bw._parse_size("1G") == 1024 ** 3
    assert bw._parse_size("4096") == 4096
    sizes = bw.default_sizes("cpu")
    assert sizes == sorted(sizes) and sizes[0] == 16 * KIB
    assert len(bw.default_sizes("cpu", quick=True)) <= 4


@pytest.mark.parametrize("kwargs, match", [
    (dict(device="tpu"), "device"),
    (dict(sizes=[0]), "size"),
    (dict(sizes=[KIB], kernels=("add",)), "kernel"),
    (dict(sizes=[KIB], dtype="int8"), "dtype"),
    (dict(sizes=[KIB], reps=0), "reps"),
    (dict(sizes=[KIB], backend="jax"), "backend"),
])
def test_bad_input_is_named(kwargs, match):
    with pytest.raises(ValueError, match=match):
        bw.run(**kwargs)


def test_cuda_request_without_gpu_fails_cleanly(capsys):
    torch = pytest.importorskip("torch")
    if torch.cuda.is_available():
        pytest.skip("a GPU is present")
    assert bw.main(["--device", "cuda", "--sizes", "64K"]) == 2
    assert "CUDA" in capsys.readouterr().err
