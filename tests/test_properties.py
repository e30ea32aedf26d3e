"""Property-based tests (hypothesis) over the public API: hostile input fails clearly and fast.

For each public function, one argument at a time is replaced by a hostile value (NaN, inf,
negatives, huge integers, strings that look like numbers or booleans, None, containers, numpy
scalars and arrays) while the others stay legal. Every call must either raise ``ValueError`` or
``TypeError``, or return a value whose numbers are all finite, and it must do so within a second.
Around that net, a few properties pin the cases issue 15 found (wrong answers that looked
right), so they cannot come back. Sized to run in a few seconds (``max_examples`` below).
"""
import dataclasses
import json
import math
import time
import warnings

import numpy as np
import pytest

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from companion import (checks, claims, comm, exercises, fabric, hardware,  # noqa: E402
                       memory, model, parallel, power, reliability, roofline, schema, speedup,
                       stack, units)
from companion.bench import record  # noqa: E402

FAST = settings(max_examples=40, deadline=None, derandomize=True, database=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
# the fuzz runs once per argument of every function (about 280): fewer examples each
FUZZ = settings(FAST, max_examples=10)

# Every one of these is tried on every argument; hypothesis adds random numbers and strings.
HOSTILE_VALUES = [None, "1", "1e3", "False", "no", "", True, False, [], [1.0], {}, (1, 2), 1j,
                  float("nan"), float("inf"), -float("inf"), 0, -1, -0.5, 1.5, -1e300, 1e300,
                  10 ** 400, -10 ** 400, 2 ** 63, 2 ** 64 + 1, np.float64("nan"), np.int64(-1),
                  np.array(3.0), np.array([1.0, 2.0]), np.array([]), object()]
HOSTILE = st.one_of(st.floats(allow_nan=True, allow_infinity=True),
                    st.integers(min_value=-10 ** 30, max_value=10 ** 30), st.text(max_size=5))

LAYOUT = model.Layout(tp=8, pp=1, dp=1, global_batch=8)
# (function, legal keyword arguments): every argument is fuzzed in turn
API = [
    (units.gb, dict(x=80)), (units.gib, dict(x=80)), (units.tb, dict(x=1)),
    (units.to_gb, dict(n_bytes=1e9)), (units.gbit_per_s, dict(x=400)),
    (units.line_rate_Bps, dict(gbit_per_s_signalled=512, efficiency=0.98)),
    (units.per_direction, dict(bidirectional_Bps=900e9)),
    (units.bidirectional, dict(per_direction_Bps=450e9)), (units.tflops, dict(x=989.4)),
    (units.dense_from_sparse, dict(sparse_flops=1979e12, factor=2.0)),
    (units.si, dict(value=989.4e12, unit="FLOP/s", digits=3)),
    (reliability.mtbf_from_count, dict(interruptions=419, duration_s=54 * 86400)),
    (reliability.job_mtbf_s, dict(per_component_mtbf_s=1.8e8, num_components=16384)),
    (reliability.young_interval_s, dict(checkpoint_s=60, mtbf_s=11000)),
    (reliability.daly_interval_s, dict(checkpoint_s=60, mtbf_s=11000)),
    (reliability.expected_wall_s, dict(work_s=36000, interval_s=3600, checkpoint_s=60,
                                       restart_s=600, mtbf_s=11000)),
    (reliability.goodput, dict(interval_s=1200, checkpoint_s=60, restart_s=600, mtbf_s=11000)),
    (reliability.goodput_first_order, dict(interval_s=1200, checkpoint_s=60, restart_s=600,
                                           mtbf_s=11000)),
    (reliability.simulate_wall_s, dict(work_s=36000, interval_s=3600, checkpoint_s=60,
                                       restart_s=600, mtbf_s=11000, runs=20, seed=0)),
    (reliability.checkpoint_bytes, dict(model="llama3-8b", precision="bf16", optimizer=True)),
    (reliability.write_time_s, dict(nbytes=5e12, storage_Bps=2e12)),
    (reliability.tokens_per_s, dict(achieved_flops=4e17, model=405e9)),
    (roofline.gemm, dict(m=4096, n=4096, k=4096, dtype="bf16")),
    (roofline.gemm_time, dict(m=4096, n=4096, k=4096, gpu="H100")),
    (roofline.gemm_efficiency, dict(m=4096, n=4096, gpu="H100")),
    (roofline.elementwise, dict(n_elements=1 << 20, dtype="bf16")),
    (roofline.layernorm, dict(rows=4096, hidden=5120)),
    (roofline.softmax, dict(rows=4096, cols=4096)),
    (roofline.ridge_point, dict(gpu="H100", precision="bf16", sparse=False)),
    (roofline.roofline_time, dict(cost=roofline.Cost("x", 1e12, 1e9), gpu="H100",
                                  efficiency=0.8, overhead_s=0.0)),
    (memory.model_state_bytes_per_param, dict(precision="bf16", dp=8, zero_stage=1,
                                              distributed_optimizer=False, fp8_params=False)),
    (memory.megatron_bytes_per_param, dict(dp=64, distributed_optimizer=True)),
    (memory.activations_per_layer_bytes, dict(seq_len=2048, microbatch=1, hidden=12288,
                                              heads=96, tp=8, sequence_parallel=True,
                                              recompute="selective", flash_attention=False)),
    (memory.pipeline_inflight_microbatches, dict(pp=8, vpp=2, num_microbatches=64)),
    (memory.kv_cache_bytes, dict(model="llama3-8b", context_len=8192, batch=4, tp=1)),
    (memory.training_memory, dict(model="gpt3-175b", layout=LAYOUT, gpu="H100",
                                  reserve_bytes=0.0, fp8_params=False, num_microbatches=8)),
    (memory.training_memory, dict(model="gpt3-175b", layout=LAYOUT, capacity_bytes=80e9)),
    (parallel.estimate, dict(model="gpt3-175b", layout=LAYOUT, gpu="H100", num_gpus=8,
                             reserve_bytes=0.0)),
    (parallel.tp_layer, dict(gpu="H100", hidden=5120, heads=40, tp=8, overlap=False,
                             link_efficiency=1.0)),
    (comm.bus_factor, dict(op="all_reduce", n=8)),
    (comm.collective_time_s, dict(op="all_reduce", size_bytes=1 << 30, n=8,
                                  bandwidth_Bps=450e9, latency_s=5e-6)),
    (comm.ring_steps, dict(op="all_reduce", n=8)),
    (power.training_flops, dict(params=13e9, tokens=300e9)),
    (power.gpu_power_w, dict(tdp_w=700, utilisation=0.8, idle_w=100)),
    (power.energy_j, dict(power_w=700, time_s=3600)),
    (power.facility_w, dict(it_w=1e6, pue=1.3)),
    (power.power_cap, dict(cap_w=500, max_w=700, floor_w=210, exponent=3.0)),
    (power.time_ratio_for_saving, dict(saving=0.41, power_ratio=1000 / 700)),
    (speedup.amdahl_speedup, dict(gemm_fraction=0.7, gemm_speedup=2.0, overhead_fraction=0.0)),
    (fabric.slow_leaf_probability, dict(slow_leaf_fraction=0.125, leaves=8)),
    (stack.ib_timeout_s, dict(value=22)), (stack.ib_retry_effective, dict(value=13)),
    (stack.min_driver_for_cuda, dict(cuda="12.8")),
    (model.preset, dict(name="gpt3-175b")),
    (model.Layout, dict(tp=8, pp=2, dp=4, cp=1, ep=1, vpp=1, microbatch=1, global_batch=64,
                        sequence_parallel=True, recompute="selective", zero_stage=0,
                        distributed_optimizer=True, precision="bf16")),
    (roofline.attention, dict(seq_len=4096, heads=32, head_dim=128, batch=1, causal=True,
                              flash=True)),
    (roofline.batched_gemm, dict(batch=8, m=512, n=512, k=64)),
    (roofline.attainable_flops, dict(intensity=100.0, gpu="H100", sparse=False)),
    (memory.decode_step, dict(model="llama3-8b", batch=8, context_len=4096, gpu="H100", tp=1)),
    (memory.params_per_gpu, dict(model="gpt3-175b", layout=LAYOUT)),
    (memory.kv_heads_per_gpu, dict(model="llama3-70b", tp=8)),
    (reliability.plan, dict(checkpoint_s=60, restart_s=600, mtbf_s=11000)),
    (reliability.storage_Bps_for, dict(nbytes=5e12, budget_s=60)),
    (reliability.input_Bps, dict(achieved_flops=4e17, model="llama3-8b", bytes_per_token=4.0)),
    (comm.algo_bandwidth, dict(size_bytes=1 << 30, seconds=0.01)),
    (comm.bus_bandwidth, dict(op="all_gather", size_bytes=1 << 30, n=8, seconds=0.01)),
    (comm.fit_alpha_beta, dict(size_bytes=[4096, 65536, 1 << 20], seconds=[1e-5, 2e-5, 1e-4])),
    (fabric.tail_latency, dict(cluster_sizes=[8, 1024], compute_s=0.1, comm_s=0.01, steps=200,
                               seed=0)),
    (fabric.bucket_tradeoff, dict(grad_bytes=1e9, bucket_bytes=[25e6, 1e8], backward_s=0.1, n=8,
                                  bandwidth_Bps=50e9, latency_s=4e-6)),
    (fabric.hierarchical_all_reduce_time_s, dict(size_bytes=1e9, fabric=fabric.Fabric(
        gpus_per_domain=8, scaleup_Bps=450e9, nic_Bps=50e9), n_domains=16)),
    (power.achieved_flops, dict(gpu="H100", precision="bf16", mfu=0.4)),
    (power.training_time_s, dict(flops=1e23, num_gpus=1024, gpu="H100", precision="bf16",
                                 mfu=0.4)),
    (power.implied_mfu, dict(flops=3.8e25, gpu_hours_total=30.84e6, gpu="H100",
                             precision="bf16")),
    (power.training_run, dict(params=13e9, tokens=300e9, gpu="H100", num_gpus=128, mfu=0.4,
                              pue=1.3, price_per_kwh=0.1)),
    (power.electricity_cost, dict(joules=3.6e12, price_per_kwh=0.1)),
    (power.saving_at_equal_throughput, dict(efficiency_ratio=1.6)),
    (speedup.linear_layer_step, dict(tokens=8192, in_features=8192, out_features=8192,
                                     gpu="H100", scheme="fp8_tensor", fused=False)),
    (speedup.step_speedup, dict(gemm_fraction=0.7, tokens=8192, hidden=8192, gpu="H100")),
    (stack.parse_version, dict(param="cuda", text="12.8.1")),
    (stack.check_stack, dict(gpu="B200", cuda="12.8", driver="570.133.20")),
    (stack.env_check, dict(env={"NCCL_IB_TIMEOUT": "22", "NCCL_ALGO": "Ring"})),
    (stack.parse_exports, dict(text="export NCCL_IB_TIMEOUT=22\n")),
    (stack.command_line_check, dict(args="--tensor-model-parallel-size 8")),
    (hardware.gpu, dict(name="H100")), (hardware.link, dict(name="NVLink4")),
    (hardware.system, dict(name="DGX H100")),
    (exercises.check, dict(exercise_id="par-bubble-table5", answer=7 / 192)),
    (claims.evaluate, dict(claim_id="nvl72-is-36-gpus")),
    (model.Transformer, dict(name="t", layers=4, hidden=1024, heads=8, ffn_hidden=4096,
                             vocab=32000, seq_len=2048, kv_heads=4, ffn_type="swiglu",
                             experts=8, top_k=2, shared_experts=1, dense_layers=1,
                             tied_embeddings=False, bias=False, learned_positions=False)),
    (hardware.gpu("H100").peak_flops, dict(precision="bf16", sparse=True)),
]
CASES = [(fn, kwargs, param) for fn, kwargs in API for param in kwargs]


def _finite(value, seen=0) -> bool:
    """Whether every number inside ``value`` (scalars, arrays, dataclasses, dicts, lists)
    is finite."""
    if seen > 4:
        return True
    if isinstance(value, (bool, str, type(None))):
        return True
    if isinstance(value, (int, np.integer)):
        return True
    if isinstance(value, (float, np.floating)):
        return math.isfinite(float(value))
    if isinstance(value, np.ndarray):
        return value.dtype.kind not in "fc" or bool(np.isfinite(value).all())
    if dataclasses.is_dataclass(value):
        return all(_finite(getattr(value, f.name), seen + 1) for f in dataclasses.fields(value))
    if isinstance(value, dict):
        return all(_finite(v, seen + 1) for v in value.values())
    if isinstance(value, (list, tuple)):
        return all(_finite(v, seen + 1) for v in value)
    return True


@pytest.fixture(scope="module", autouse=True)
def _warm():
    for fn, kwargs in API:  # load the registries once: the per-call second is for the call
        fn(**kwargs)


def _must_raise(legal, value) -> bool:
    """Type rules of the checks layer: a non-boolean where a boolean is meant, and a string
    or a boolean where a number is meant, never pass."""
    is_bool = isinstance(value, (bool, np.bool_))
    if isinstance(legal, bool):
        return not is_bool
    if isinstance(legal, (int, float)):
        return is_bool or isinstance(value, str)
    return False


def _fails_clearly_or_returns_finite(fn, kwargs, param, value):
    t0 = time.perf_counter()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            out = fn(**{**kwargs, param: value})
    except (ValueError, TypeError) as exc:
        assert str(exc), f"{fn.__name__}({param}={value!r}) raised an empty message"
    else:
        assert not _must_raise(kwargs[param], value), \
            f"{fn.__name__}({param}={value!r}) was accepted: {out!r:.200}"
        assert _finite(out), f"{fn.__name__}({param}={value!r}) returned a non-finite {out!r}"
    assert time.perf_counter() - t0 < 1.0, f"{fn.__name__}({param}={value!r}) took > 1 s"


_IDS = [f"{getattr(fn, '__module__', '').split('.')[-1]}.{fn.__name__}-{p}"
        for fn, _, p in CASES]


@pytest.mark.parametrize("fn, kwargs, param", CASES, ids=_IDS)
def test_each_hostile_value_fails_clearly_or_returns_finite(fn, kwargs, param):
    for value in HOSTILE_VALUES:
        _fails_clearly_or_returns_finite(fn, kwargs, param, value)


@pytest.mark.parametrize("fn, kwargs, param", CASES, ids=_IDS)
@FUZZ
@given(value=HOSTILE)
def test_random_values_fail_clearly_or_return_finite(fn, kwargs, param, value):
    _fails_clearly_or_returns_finite(fn, kwargs, param, value)


def _same(a, b, depth=0) -> bool:
    """Recursive equality that treats numbers as numbers (1 == 1.0 == np.float64(1))."""
    if depth > 4:
        return True
    if isinstance(a, (bool, np.bool_)) or isinstance(b, (bool, np.bool_)):
        return bool(a) == bool(b)
    if isinstance(a, (int, float, np.number)) and isinstance(b, (int, float, np.number)):
        return math.isclose(float(a), float(b), rel_tol=1e-12) or a == b
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        return np.allclose(np.asarray(a, dtype=float), np.asarray(b, dtype=float), rtol=1e-12)
    if dataclasses.is_dataclass(a) and dataclasses.is_dataclass(b):
        return all(_same(getattr(a, f.name), getattr(b, f.name), depth + 1)
                   for f in dataclasses.fields(a))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k], depth + 1) for k in a)
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(_same(x, y, depth + 1) for x, y in zip(a, b))
    return a == b


_NUMERIC = [(fn, kwargs, p) for fn, kwargs, p in CASES
            if isinstance(kwargs[p], (int, float)) and not isinstance(kwargs[p], bool)]


@pytest.mark.parametrize("fn, kwargs, param", _NUMERIC,
                         ids=[f"{fn.__name__}-{p}" for fn, _, p in _NUMERIC])
def test_numpy_scalars_and_0d_arrays_and_tensors_count_as_scalars(fn, kwargs, param):
    torch = pytest.importorskip("torch")
    base = fn(**kwargs)
    v = kwargs[param]
    for twin in (np.float64(v) if isinstance(v, float) else np.int64(v), np.array(v),
                 torch.tensor(v, dtype=torch.float64 if isinstance(v, float) else torch.int64)):
        out = fn(**{**kwargs, param: twin})
        assert _same(out, base), f"{fn.__name__}({param}={twin!r}) gave {out!r:.200}"


# -- the cases of issue 15, as properties --------------------------------------------------------
@FAST
@given(value=st.one_of(st.text(), st.integers(), st.none(), st.floats()))
def test_booleans_are_strict(value):
    with pytest.raises(TypeError, match="fp8_params must be True or False"):
        memory.model_state_bytes_per_param(fp8_params=value)


@FAST
@given(reserve=st.one_of(st.floats(max_value=-1e-3), st.just(float("nan")),
                         st.just(float("inf"))))
def test_estimate_refuses_a_negative_or_nonfinite_reserve(reserve):
    with pytest.raises(ValueError, match="reserve_bytes"):
        parallel.estimate("gpt3-175b", LAYOUT, "H100", num_gpus=8, reserve_bytes=reserve)


@FAST
@given(tau=st.floats(1, 1e6), d=st.floats(0, 1e4), r=st.floats(0, 1e4), m=st.floats(1, 1e7))
def test_first_order_goodput_is_a_fraction_or_an_error(tau, d, r, m):
    try:
        g = reliability.goodput_first_order(tau, d, r, m)
    except ValueError as exc:
        assert "goodput()" in str(exc)
    else:
        assert 0 <= g <= 1


@FAST
@given(tau=st.floats(1, 1e5), d=st.floats(0, 1e3), r=st.floats(0, 1e3), m=st.floats(1, 1e6),
       segments=st.integers(1, 10 ** 9), runs=st.integers(1, 10 ** 6))
def test_simulation_never_hangs_or_exhausts_memory(tau, d, r, m, segments, runs):
    t0 = time.perf_counter()
    try:
        sim = reliability.simulate_wall_s(segments * tau, tau, d, r, m, runs=runs)
    except ValueError:
        pass
    else:
        assert sim.shape == (runs,) and (sim >= segments * (tau + d) - 1e-6 * segments * tau).all()
    assert time.perf_counter() - t0 < 5.0  # bounded well under a second on an idle core


@FAST
@given(flops=st.floats(-1e30, 1e30), moved=st.floats(-1e30, 1e30))
def test_roofline_time_is_never_negative(flops, moved):
    try:
        t = roofline.roofline_time(roofline.Cost("x", flops, moved), "H100")
    except ValueError:
        assert flops < 0 or moved < 0 or flops == moved == 0
    else:
        assert t.time_s >= 0 and t.compute_s >= 0 and t.memory_s >= 0


@FAST
@given(x=st.floats(0, 1e300))
def test_unit_helpers_round_trip_or_refuse_overflow(x):
    try:
        b = units.gb(x)
    except ValueError as exc:
        assert "too large" in str(exc) and x * 1e9 == math.inf
    else:
        assert math.isfinite(b) and units.to_gb(b) == pytest.approx(x, rel=1e-12)


@FAST
@given(m=st.integers(1, 10 ** 500))
def test_gemm_dimensions_past_float_exactness_are_refused(m):
    try:
        est = roofline.gemm_time(m, 1024, 1024, "H100")
    except ValueError as exc:
        assert m > checks.MAX_EXACT_INT and "m" in str(exc)
    else:
        assert m <= checks.MAX_EXACT_INT and math.isfinite(est.timing.time_s)


@FAST
@given(name=st.sampled_from(model.presets()))
def test_preset_names_work_wherever_a_transformer_does(name):
    m = model.preset(name)
    assert memory.kv_cache_bytes(name, 1024) == memory.kv_cache_bytes(m, 1024)
    assert reliability.checkpoint_bytes(name) == reliability.checkpoint_bytes(m)


@FAST
@given(value=st.one_of(st.floats(allow_nan=True, allow_infinity=True), st.integers(-5, 5)),
       nested=st.dictionaries(st.text(min_size=1, max_size=3),
                              st.floats(allow_nan=True, allow_infinity=True), max_size=3))
def test_records_are_standard_json(tmp_path_factory, value, nested):
    d = tmp_path_factory.mktemp("rec")
    p = record.write_record("prop", [{"v": value, "n": nested}], {"device": "d"}, d)
    body = json.loads(p.read_text(), parse_constant=lambda c: pytest.fail(f"non-standard {c}"))
    v = body["results"][0]["v"]
    assert v is None if not math.isfinite(value) else v == value
    (rec,) = record.load_records("prop", d)
    assert rec["results"][0]["n"].keys() == nested.keys()


@FAST
@given(row=st.integers(1, 30), word=st.sampled_from(["no", "yes", "true", "0", "1", "FALSE",
                                                      " True", "Tru", ""]))
def test_a_non_boolean_in_published_runs_is_named(tmp_path_factory, row, word):
    import csv
    src = schema.DATA_DIR / "published_runs.csv"
    with open(src, newline="") as f:
        rows = list(csv.reader(f))
    col = rows[0].index("sequence_parallel")
    rows[row][col] = word
    out = tmp_path_factory.mktemp("csv") / "published_runs.csv"
    with open(out, "w", newline="") as f:
        csv.writer(f).writerows(rows)
    with pytest.raises(schema.SchemaError, match=f"row {row} .*column 'sequence_parallel'"):
        schema.check(out)


def _explorers():
    from companion.explore import interconnect, intro, low_precision, memory as mx, pitfalls
    from companion.explore import power as px
    return [
        (low_precision.amdahl, dict(log2_hidden=1e300)),  # hung building 2**1e300
        (low_precision.error_by_magnitude, dict(per_binade=0)),  # returned NaN rows
        (low_precision.error_by_magnitude, dict(hi_log2=10 ** 400)),
        (low_precision.outlier_sqnr, dict(outlier_log10=1e300)),
        (mx.ledger, dict(tp=0)),  # ZeroDivisionError
        (mx.kv_growth, dict(points=0)),
        (mx.measured_roof, dict(memory_Bps=1e11, peak_flops=1e12, points=10 ** 9)),
        (interconnect.hdr_leaf_story, dict(microbatches=10 ** 400)),
        (intro.gemm_fraction_of_peak, dict(overhead_us="5")),
        (pitfalls.scale_table, dict(gpu_mtbf_kh=10 ** 400)),
        (pitfalls.simulation_table, dict(work_h=True)),
        (px.cap_frame, dict(floor_pct=10 ** 400)),
    ]


@pytest.mark.parametrize("case", range(12))
def test_explorer_frames_refuse_what_their_sliders_never_send(case):
    fn, kwargs = _explorers()[case]
    t0 = time.perf_counter()
    with pytest.raises((ValueError, TypeError)):
        fn(**kwargs)
    assert time.perf_counter() - t0 < 1.0


_TYPED = [(s, c.name) for s in schema.SCHEMAS.values() for c in s.columns
          if c.kind != "text" and c.required and (schema.DATA_DIR / s.file).exists()]


@FAST
@given(case=st.sampled_from(_TYPED), row=st.integers(1, 60),
       junk=st.sampled_from(["abc", "1,5", "nan", "inf", "-1e400", "yes please", "12.x"]))
def test_any_bad_typed_cell_in_any_data_file_is_named(tmp_path_factory, case, row, junk):
    import csv
    s, column = case
    with open(schema.DATA_DIR / s.file, newline="") as f:
        rows = list(csv.reader(f))
    row = 1 + (row - 1) % (len(rows) - 1)
    if column not in rows[0]:
        return
    rows[row][rows[0].index(column)] = junk
    out = tmp_path_factory.mktemp("csv") / s.file.rsplit("/", 1)[-1]
    with open(out, "w", newline="") as f:
        csv.writer(f).writerows(rows)
    with pytest.raises(schema.SchemaError, match=f"row {row} .*column {column!r}: {junk!r}"):
        schema.check(out)
