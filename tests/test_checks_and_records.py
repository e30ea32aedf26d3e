"""Shared argument checks and measurement records."""
import json

import numpy as np
import pytest

from companion import checks
from companion.bench import record


def test_choice_suggests_close_matches():
    with pytest.raises(ValueError, match=r"Did you mean 'all_reduce'"):
        checks.choice("op", "allreduce", ["all_reduce", "all_gather"])
    with pytest.raises(TypeError, match="op must be a string"):
        checks.choice("op", 3, ["all_reduce"])


@pytest.mark.parametrize("kw, value, err", [
    (dict(positive=True), 0, ValueError), (dict(integer=True), 1.5, TypeError),
    ({}, float("nan"), ValueError), ({}, True, TypeError), (dict(minimum=2), 1, ValueError)])
def test_number(kw, value, err):
    with pytest.raises(err, match="size"):
        checks.number("size", value, **kw)


def test_divides_and_floating():
    with pytest.raises(ValueError, match="tp=3 must divide heads=32"):
        checks.divides("tp", 3, "heads", 32)
    with pytest.raises(TypeError, match="floating"):
        checks.floating_array("x", np.arange(3))


def test_record_is_written_once_with_provenance(tmp_path):
    meta = record.provenance("cpu")
    for key in ("date_utc", "command", "python", "numpy", "torch", "device"):
        assert key in meta
    p = record.write_record("unit-test", [{"v": 1}], meta, tmp_path)
    body = json.loads(p.read_text())
    assert body["results"] == [{"v": 1}] and body["kind"] == "unit-test"
    p2 = record.write_record("unit-test", [{"v": 2}], meta, tmp_path)
    assert p2 != p and json.loads(p.read_text())["results"] == [{"v": 1}]
    assert [r["results"][0]["v"] for r in record.load_records("unit-test", tmp_path)] == [1, 2]
    assert not list(tmp_path.glob(".tmp-*"))


# -- the shared checks: the cases of issue 15 ---------------------------------------------------
def test_number_accepts_numpy_and_torch_scalars():
    import torch
    assert checks.number("x", np.float32(2.5)) == 2.5
    assert checks.number("x", np.array(3.0), integer=True) == 3
    assert checks.number("x", torch.tensor(4)) == 4
    with pytest.raises(TypeError, match="x must be a number; got ndarray"):
        checks.number("x", np.array([1.0, 2.0]))


def test_number_refuses_ints_too_large_for_a_float():
    with pytest.raises(ValueError, match="m is too large"):
        checks.number("m", 10 ** 400, integer=True)


@pytest.mark.parametrize("value", ["False", "no", 0, 1, None, "True", np.float64(1.0)])
def test_boolean_is_strict(value):
    with pytest.raises(TypeError, match="flag must be True or False"):
        checks.boolean("flag", value)


def test_boolean_accepts_numpy_bools():
    assert checks.boolean("flag", np.bool_(True)) is True


def test_scaled_refuses_overflow():
    assert checks.scaled("x", 80, 1e9) == 80e9
    with pytest.raises(ValueError, match="x=1e\\+300 is too large"):
        checks.scaled("x", 1e300, 1e9)


def test_transformer_takes_presets_and_suggests():
    from companion.model import Transformer, as_transformer
    assert isinstance(as_transformer("model", "gpt3-175b"), Transformer)
    with pytest.raises(ValueError, match="Did you mean"):
        as_transformer("model", "gpt3-175")
    with pytest.raises(TypeError, match="model must be a Transformer or a preset name"):
        as_transformer("model", 175e9)


def test_real_array_and_gpu_count():
    assert checks.real_array("x", [1, 2]).dtype == np.float64
    with pytest.raises(ValueError, match=r"x must be finite and >= 0; got \[-1.0\]"):
        checks.real_array("x", [1, -1], nonnegative=True)
    with pytest.raises(ValueError, match=f"num_gpus must be <= {checks.MAX_GPUS}"):
        checks.gpu_count("num_gpus", 10 ** 30)


# -- records: what crashes and collisions leave behind -------------------------------------------
def _meta():
    return {"device": "test-device", "date_utc": "2026-01-01T00:00:00+00:00"}


def test_records_are_standard_json_with_nan_as_null(tmp_path):
    p = record.write_record("unit-test", [{"v": float("nan"), "w": np.float64("inf"),
                                           "n": np.int64(3)}], _meta(), tmp_path)
    text = p.read_text()
    assert "NaN" not in text and "Infinity" not in text
    # json.loads with a parse_constant that refuses NaN: the file is RFC 8259 JSON
    body = json.loads(text, parse_constant=lambda c: pytest.fail(f"non-standard {c}"))
    assert body["results"] == [{"v": None, "w": None, "n": 3}]


def test_same_name_collision_keeps_both_records(tmp_path, monkeypatch):
    import datetime as dt

    class Frozen(dt.datetime):
        @classmethod
        def now(cls, tz=None):
            return dt.datetime(2026, 1, 1, 12, 0, 0, 123456, tzinfo=dt.timezone.utc)

    monkeypatch.setattr(record._dt, "datetime", Frozen)
    paths = [record.write_record("unit-test", [{"v": i}], _meta(), tmp_path) for i in range(3)]
    assert len(set(paths)) == 3
    assert sorted(r["results"][0]["v"] for r in record.load_records("unit-test", tmp_path)) \
        == [0, 1, 2]


def test_reader_skips_temp_files_and_names_a_corrupt_one(tmp_path):
    record.write_record("unit-test", [{"v": 1}], _meta(), tmp_path)
    (tmp_path / ".tmp-abc123.json").write_text('{"kind": "unit-test", "res')  # a killed writer
    (tmp_path / "torn-record.json").write_text('{"kind": "unit-test", "results": [')
    (tmp_path / "list.json").write_text("[1, 2]")
    with pytest.warns(UserWarning) as seen:
        recs = record.load_records("unit-test", tmp_path)
    assert [r["results"] for r in recs] == [[{"v": 1}]]
    messages = " ".join(str(w.message) for w in seen)
    assert "torn-record.json" in messages and "list.json" in messages
    assert ".tmp-abc123" not in messages


def test_records_come_oldest_first_by_their_own_timestamp(tmp_path):
    # names sort the other way round from the times written inside the records
    for name, when in (("a-late.json", "2026-03-01T00:00:00+00:00"),
                       ("b-early.json", "2026-01-01T00:00:00+00:00"),
                       ("c-middle.json", "2026-02-01T00:00:00.5+00:00")):
        (tmp_path / name).write_text(json.dumps({"kind": "k", "written_utc": when,
                                                 "meta": {}, "results": [name]}))
    assert [r["results"][0] for r in record.load_records("k", tmp_path)] == \
        ["b-early.json", "c-middle.json", "a-late.json"]


_WRITER = """
import os, sys, time
from companion.bench import record
out = sys.argv[1]
for i in range(2):  # two complete records
    record.write_record("kill-test", [{"i": i}], {"device": "d"}, out)
real_fsync = os.fsync
def stall(fd):  # the third write: body written to the temporary file, not yet linked
    real_fsync(fd)
    print("in-write", flush=True)
    time.sleep(60)
record.os.fsync = stall
record.write_record("kill-test", [{"i": 2}], {"device": "d"}, out)
"""


def test_a_writer_killed_mid_write_leaves_readable_records(tmp_path):
    import os
    import signal
    import subprocess
    import sys
    import warnings
    from pathlib import Path
    root = Path(record.__file__).resolve().parents[2]
    env = dict(os.environ, PYTHONPATH=str(root), OMP_NUM_THREADS="1")
    proc = subprocess.Popen([sys.executable, "-c", _WRITER, str(tmp_path)], env=env,
                            stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().strip() == "in-write"
    finally:
        proc.send_signal(signal.SIGKILL)  # SIGKILL: no cleanup handler runs
        proc.wait(timeout=30)
        proc.stdout.close()
    assert list(tmp_path.glob(".tmp-*.json")), "the killed write should leave its temp file"
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the leftover is skipped silently, not read as a record
        recs = record.load_records("kill-test", tmp_path)
    assert [r["results"] for r in recs] == [[{"i": 0}], [{"i": 1}]]


def test_concurrent_writers_lose_nothing(tmp_path):
    from concurrent.futures import ThreadPoolExecutor
    with ThreadPoolExecutor(8) as pool:
        paths = list(pool.map(lambda i: record.write_record("conc", [{"i": i}], _meta(),
                                                            tmp_path), range(32)))
    assert len(set(paths)) == 32
    assert sorted(r["results"][0]["i"] for r in record.load_records("conc", tmp_path)) == \
        list(range(32))


@pytest.mark.parametrize("kind, results, meta, err", [
    ("", [], {}, "kind must be a non-empty string"), (3, [], {}, "kind"),
    ("k", {"v": 1}, {}, "results must be a list"), ("k", [], None, "meta must be a dict")])
def test_write_record_checks_its_arguments(tmp_path, kind, results, meta, err):
    with pytest.raises(TypeError, match=err):
        record.write_record(kind, results, meta, tmp_path)
    assert not list(tmp_path.iterdir())


# -- issue 15's list, one by one: each fails clearly (or answers right) within a second ----------
def _issue_15_cases():
    from companion import memory, parallel, reliability, roofline, units
    from companion.model import Layout
    layout = Layout(tp=8, global_batch=8)

    def estimate(reserve):
        return parallel.estimate("gpt3-175b", layout, "H100", num_gpus=8, reserve_bytes=reserve)
    return [
        (lambda: estimate(-1e12), ValueError, "reserve_bytes must be >= 0"),
        (lambda: estimate(float("nan")), ValueError, "reserve_bytes must be finite"),
        (lambda: reliability.goodput_first_order(36000, 600, 600, 3600), ValueError,
         r"negative.*use goodput\(\)"),
        (lambda: roofline.roofline_time(roofline.Cost("x", -1e12, -1e6), "H100"), ValueError,
         "cost.flops must be >= 0"),
        (lambda: memory.model_state_bytes_per_param(fp8_params="False"), TypeError,
         "fp8_params must be True or False"),
        (lambda: reliability.simulate_wall_s(86400, 3600, 60, 600, mtbf_s=60), ValueError,
         "too frequent to simulate"),
        (lambda: reliability.simulate_wall_s(1e12, 1, 60, 600, mtbf_s=3600), ValueError,
         "runs x segments"),
        (lambda: roofline.gemm_time(10 ** 400, 1024, 1024, "H100"), ValueError, "m is too large"),
        (lambda: units.gb(1e300), ValueError, "too large"),
    ]


@pytest.mark.parametrize("case", range(9))
def test_issue_15_cases_fail_clearly_and_fast(case):
    import time
    call, exc, match = _issue_15_cases()[case]
    t0 = time.perf_counter()
    with pytest.raises(exc, match=match):
        call()
    assert time.perf_counter() - t0 < 1.0


def test_tp_layer_on_a_gpu_without_scaleup_bandwidth_says_so():
    # the issue's case was MI355X; once the registry gives a GPU its scale-up bandwidth the
    # layer is priced, and only GPUs still without one must raise
    import math
    import re
    from companion import hardware, parallel
    for name in hardware.gpus()["key"]:
        g = hardware.gpu(name)
        if g.scaleup_Bps is None:
            with pytest.raises(ValueError, match=f"NVLink.*{re.escape(g.name)}"):
                parallel.tp_layer(name, heads=40, hidden=5120, tp=8)
        elif g.name.endswith("MI355X"):
            assert math.isfinite(parallel.tp_layer(name).comm_share)


def test_issue_15_preset_names_work_where_estimate_takes_them():
    from companion import memory
    from companion.model import Layout, preset
    layout = Layout(tp=8, global_batch=8)
    assert memory.training_memory("gpt3-175b", layout, "H100") == \
        memory.training_memory(preset("gpt3-175b"), layout, "H100")
