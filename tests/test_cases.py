"""companion.cases: a scenario's fastest layout turned into days, energy and cost, and the
seed-scenario tables of the case-studies chapter."""
import pytest

from companion import cases, claims, hardware, parallel, power, validation
from companion.cases import Scenario
from companion.explore import case_studies as cs
from companion.search import search


def _13b(gpu="H100", precision="fp8", **kw):
    return Scenario("13B", "seed-13b", gpu, 128, 300e9, 1024, precision, **kw)


def test_days_energy_and_cost_follow_from_the_step():
    o = cases.price(_13b(), pue=1.5, price_per_kwh=0.8)
    best = search("seed-13b", "H100", 128, 1024, precision="fp8", top=1).iloc[0]
    steps = 300e9 / (1024 * 2048)
    assert o.step_time_s == best["step_time_s"] and o.steps == pytest.approx(steps)
    assert o.days == pytest.approx(steps * best["step_time_s"] / 86400)
    # NVIDIA DGX H100 datasheet: 10.2 kW maximum for 8 x 700 W GPUs: 575 W per GPU besides
    host = (10.2e3 - 8 * 700) / 8
    it_w = 128 * (700 + host)
    assert o.facility_kwh == pytest.approx(it_w * 1.5 * o.days * 24 / 1e3)
    assert o.gpu_kwh == pytest.approx(0.7 * o.gpu_hours)  # every GPU at its 700 W TDP
    assert o.electricity_cost == pytest.approx(0.8 * o.facility_kwh)
    # the chosen layout is one estimate() prices the same
    e = parallel.estimate("seed-13b", o.layout, "H100", 128)
    assert e.step_time_s == pytest.approx(o.step_time_s, rel=1e-12)


def test_measured_gpu_power_and_no_host():
    o = cases.price(_13b(), gpu_w=claims.SEED_GPU_KW * 1e3, host=False)
    assert o.gpu_kwh == pytest.approx(o.gpu_hours * claims.SEED_GPU_KW)
    assert o.facility_kwh == pytest.approx(o.gpu_kwh)


def test_with_scaleout_keeps_the_node_and_its_power():
    # InfiniBand NDR200 (2x port): 200 Gb/s = 25 GB/s per direction
    c = cases.with_scaleout("DGX B200", hardware.link("NDR200").per_direction_Bps,
                            "DGX B200, NDR200")
    assert c.scaleout_Bps == 25e9 and c.gpus_per_domain == 8
    o = cases.price(Scenario("x", "seed-13b", "B200", 2000, 1e9, 2000, "bf16", c))
    rest = power.system_power("DGX B200").rest_per_gpu_w
    assert o.run.host_w_per_gpu == rest and o.cluster == "DGX B200, NDR200"
    with pytest.raises(ValueError, match="must start with the base system"):
        cases.with_scaleout("DGX B200", 25e9, "my cluster")
    with pytest.raises(TypeError, match="name must be a string"):  # was an AttributeError
        cases.with_scaleout("DGX B200", 25e9, 5)


def test_outcomes_carry_the_step_band_and_scale_days_with_it():
    o = cases.price(_13b())
    lo, hi, basis = validation.band(o.scenario.gpu, o.scenario.precision, o.step_time_s)
    assert (o.step_time_low_s, o.step_time_high_s) == pytest.approx((lo, hi))
    assert o.band_basis == basis and "cross-validated" in basis
    assert o.days_low == pytest.approx(o.days * lo / o.step_time_s)
    assert o.days_high == pytest.approx(o.days * hi / o.step_time_s)


@pytest.mark.parametrize("kw, exc, match", [
    (dict(model="seed-13c"), ValueError, "seed-13b"),
    (dict(gpu="H1000"), ValueError, "H100"),
    (dict(num_gpus=0), ValueError, "num_gpus"),
    (dict(tokens=-1.0), ValueError, "tokens"),
    (dict(precision="fp3"), ValueError, "precision"),
])
def test_bad_scenarios_name_the_parameter(kw, exc, match):
    base = dict(name="s", model="seed-13b", gpu="H100", num_gpus=8, tokens=1e9,
                global_batch=8, precision="bf16")
    with pytest.raises(exc, match=match):
        Scenario(**{**base, **kw})


def test_price_rejects_other_types_and_says_when_nothing_fits():
    with pytest.raises(TypeError, match="Scenario"):
        cases.price("13B")
    with pytest.raises(ValueError, match="fits in memory"):
        cases.price(Scenario("x", "seed-175b", "H100", 8, 1e9, 8, "bf16"))
    with pytest.raises(ValueError, match="pue"):
        cases.price(_13b(), pue=0.9)


def test_chapter_tables():
    t = cs.outcome_table("13b")
    assert list(t.index) == list(cs.MACHINES)
    assert (t["days_low"] < t["days_high"]).all()
    gap = cs.headline_gap()
    # GB200 NVL72 datasheet: 20 PFLOP/s FP4 (sparse) per GPU; HGX B200: 18, dense BF16 2.25
    assert gap["pflops"].iloc[:4].tolist() == pytest.approx([20, 18, 9, 2.25])
    fab = cs.fabric_table()
    assert fab["scaleout_Gbps_per_gpu"].tolist() == [400, 200, 100, 50]
    assert fab["mfu"].is_monotonic_decreasing
    frame = cs.run_frame("13B", 2.0, "days")
    assert set(frame["machine"]) == set(cs.MACHINES) and (frame[cs.RUN_Y] > 0).all()
    assert set(frame["unit"]) == {"days"}  # the tooltip names what the menu shows
    with pytest.raises(ValueError, match="metric"):
        cs.run_frame("13B", 1.0, "weeks")


def test_a_cluster_without_a_power_budget_says_what_to_pass():
    a100 = Scenario("a100", "seed-13b", "A100", 64, 1e9, 64, "bf16")
    with pytest.raises(ValueError, match="host=False"):
        cases.price(a100)
    assert cases.price(a100, host=False).run.host_w_per_gpu == 0.0
    with pytest.raises(cases.NoLayoutFits):
        cases.price(Scenario("x", "seed-175b", "H100", 8, 1e9, 8, "bf16"))


def test_measured_host_power_replaces_the_nameplate_share():
    # the third seed's node: 8.5 kW measured with its 8 GPUs at 0.69 kW each
    host = (claims.SEED_NODE_KW - 8 * claims.SEED_GPU_KW) * 1e3 / 8
    o = cases.price(_13b(), gpu_w=claims.SEED_GPU_KW * 1e3, host_w=host)
    assert o.facility_kwh == pytest.approx(o.gpu_hours * claims.SEED_NODE_KW / 8)
    with pytest.raises(ValueError, match="host_w"):
        cases.price(_13b(), host_w=-1.0)
