"""companion.stack against its sources: CUDA release notes, NCCL env docs, argparse."""
import pytest

from companion import stack

SEED_000_EXPORTS = """
# 实验笔记中保留的NCCL环境变量调优片段
export NCCL_IB_HCA=mlx5_0,mlx5_1
export NCCL_IB_GID_INDEX=3
export NCCL_IB_TC=128
export NCCL_DEBUG=INFO
export NCCL_IB_QPS_PER_CONNECTION=4
export NCCL_NET_GDR_LEVEL=PHB
export NCCL_PROTO=Simple
export NCCL_ALGO=Ring
export NCCL_IB_TIMEOUT=22
export NCCL_IB_RETRY_CNT=13
"""


def _by(findings, subject, severity=None):
    return [f for f in findings if f.subject == subject and severity in (None, f.severity)]


# NVIDIA CUDA Toolkit Release Notes, Table 3 (Linux x86_64 toolkit driver versions)
@pytest.mark.parametrize("cuda, driver", [
    ("12.5", "555.42.02"), ("12.5.1", "555.42.06"), ("12.4.1", "550.54.15"),
    ("12.8", "570.26"), ("12.8.1", "570.124.06"), ("12.9", "575.51.03"), ("13.0", "580.65.06"),
    ("11.8", "520.61.05"), ("12.2.2", "535.104.05")])
def test_toolkit_drivers_match_release_notes(cuda, driver):
    assert stack.min_driver_for_cuda(cuda) == driver


# CUDA 11.8 added sm_89/sm_90 (GROMACS MR 3180); 12.8 sm_100/sm_120 (Blackwell migration guide);
# 12.9 sm_103/sm_121 (CUDA 12.9 features archive)
@pytest.mark.parametrize("gpu, cuda", [("H100", "11.8"), ("H200", "11.8"), ("B200", "12.8"),
                                       ("GB200", "12.8"), ("B300", "12.9"), ("A100", "11.0")])
def test_min_cuda_per_gpu(gpu, cuda):
    assert stack.min_cuda_for_gpu(gpu) == cuda


def test_seed_stack_nemo_2405_cuda125_driver535_on_b200_is_impossible():
    f = stack.check_stack(gpu="B200", cuda="12.5", driver="535.129.03", container="nemo:24.05")
    assert f[0].severity == "error"
    errors = {x.subject for x in f if x.severity == "error"}
    # B200 needs CUDA >= 12.8 and a driver >= 570.133.20 (MIG user guide / GPU operator note);
    # the 24.05 containers are for Hopper and earlier (24.05 release notes)
    assert errors == {"cuda", "driver", "container"}
    assert any("570.133.20" in x.message for x in _by(f, "driver", "error"))
    # NeMo 24.05 does not ship CUDA 12.5; 535 < 555.42.02 but within 12.x minor-version compat
    assert _by(f, "container", "warning") and _by(f, "driver", "warning")


def test_good_stacks_have_no_errors():
    assert all(x.severity == "info" for x in
               stack.check_stack(gpu="B200", cuda="12.8", driver="570.133.20",
                                 kernel_modules="open"))
    assert all(x.severity != "error" for x in
               stack.check_stack(gpu="H100", cuda="12.4.1", driver="550.54.15"))


def test_driver_below_cuda_major_range_is_an_error():
    # 12.x minor-version compatibility needs branch >= 525 (release notes, section 2.2)
    f = stack.check_stack(cuda="12.4", driver="520.61.05")
    assert f[0].severity == "error" and f[0].subject == "driver"


def test_blackwell_needs_open_kernel_modules_and_volta_stops_at_cuda12():
    assert _by(stack.check_stack(gpu="B200", kernel_modules="proprietary"), "kernel_modules",
               "error")
    assert _by(stack.check_stack(gpu="V100", cuda="13.0"), "cuda", "error")


def test_seed_nccl_block():
    env = stack.parse_exports(SEED_000_EXPORTS)
    assert env["NCCL_IB_RETRY_CNT"] == "13" and len(env) == 10
    f = stack.nccl_env_check(env)
    # NCCL docs: default 7; 3-bit field (mlx5_ifc.h retry_count[0x3])
    retry = _by(f, "NCCL_IB_RETRY_CNT", "error")
    assert retry and "0..7" in retry[0].message
    # NCCL_PROTO and NCCL_ALGO are under "Debugging" in the NCCL env docs
    assert _by(f, "NCCL_PROTO", "warning") and _by(f, "NCCL_ALGO", "warning")
    # NCCL_IB_TIMEOUT=22: 4.096 us x 2^22 = 17.18 s
    assert "17.2 s" in _by(f, "NCCL_IB_TIMEOUT", "info")[0].message
    assert _by(f, "NCCL_IB_HCA", "warning")  # prefix match without '='


def test_ib_timeout_and_retry_arithmetic():
    assert stack.ib_timeout_s(22) == pytest.approx(4.096e-6 * 2**22)  # NCCL docs formula
    assert stack.ib_timeout_s(20) == pytest.approx(4.295, rel=1e-3)  # default since 2.23
    assert stack.ib_retry_effective(13) == 5 and stack.ib_retry_effective(7) == 7


def test_seed_001_exports_and_unknown_names():
    f = stack.env_check({"NCCL_IB_DISABLE": "0", "NCCL_NET_GDR_LEVEL": "5",
                         "NCCL_P2P_LEVEL": "2", "CUDA_LAUNCH_BLOCKING": "1",
                         "NCCL_IB_RETRYCNT": "3", "NCCL_ALGO": "ring,tre"})
    # NCCL docs: NCCL_IB_DISABLE=1 disables IB, so 0 is the default
    assert _by(f, "NCCL_IB_DISABLE", "info")
    # legacy integers: PXB = 2, and values greater than 4 are SYS
    assert any("PXB" in x.message for x in _by(f, "NCCL_P2P_LEVEL"))
    assert any("SYS" in x.message for x in _by(f, "NCCL_NET_GDR_LEVEL"))
    # CUDA Programming Guide: CUDA_LAUNCH_BLOCKING is for debugging only
    assert _by(f, "CUDA_LAUNCH_BLOCKING", "warning")
    typo = _by(f, "NCCL_IB_RETRYCNT", "warning")[0].message
    assert "NCCL_IB_RETRY_CNT" in typo
    assert "Tree" in _by(f, "NCCL_ALGO", "error")[0].message


def test_en_dash_flag_is_rejected_by_argparse():
    # seed 000 writes `–tensor-model-parallel-size 8` with U+2013
    bad = stack.run_tp_flag(["\u2013tensor-model-parallel-size", "8"])
    assert bad.returncode == 2 and "unrecognized arguments" in bad.stderr
    good = stack.run_tp_flag(["--tensor-model-parallel-size", "8"])
    assert good.returncode == 0 and good.stdout.strip().endswith("= 8")
    assert stack.run_tp_flag([]).stdout.strip().endswith(f"= {stack.MEGATRON_TP_DEFAULT}")
    f = stack.command_line_check("\u2013tensor-model-parallel-size 8")
    assert len(f) == 1 and "U+2013 EN DASH" in f[0].message


def test_every_table_row_cites_a_url():
    for name in ("cuda_drivers", "cuda_minor_compat", "gpu_arch", "gpu_drivers", "containers",
                 "env_vars"):
        assert stack.table(name)["source"].str.contains("https://").all(), name


@pytest.mark.parametrize("call, exc, match", [
    (lambda: stack.check_stack(), ValueError, "at least one"),
    (lambda: stack.check_stack(cuda="12.7"), ValueError, "no CUDA 12.7"),
    (lambda: stack.check_stack(driver="r535"), ValueError, "driver"),
    (lambda: stack.check_stack(gpu="MI300X", cuda="12.8"), ValueError, "NVIDIA"),
    (lambda: stack.check_stack(gpu="B200", kernel_modules="closed"), ValueError, "kernel_modules"),
    (lambda: stack.check_stack(container="nemo:24.5"), ValueError, "container"),
    (lambda: stack.env_check("NCCL_DEBUG=INFO"), TypeError, "mapping"),
    (lambda: stack.env_check({"NCCL_DEBUG": 1}), TypeError, "strings"),
    (lambda: stack.ib_timeout_s(40), ValueError, "NCCL_IB_TIMEOUT"),
    (lambda: stack.run_tp_flag("--tensor-model-parallel-size 8"), TypeError, "list"),
])
def test_bad_input_is_named(call, exc, match):
    with pytest.raises(exc, match=match):
        call()


def test_h100_driver_535_with_the_2405_container_is_documented():
    # NGC 24.05 release notes: driver 545+, or on data-center GPUs R470 >= 470.57, R525 >= 525.85,
    # R535 >= 535.86, R545 >= 545.23 (forward compatibility). 535.129.03 qualifies on H100.
    f = stack.check_stack(gpu="H100", driver="535.129.03", container="ngc:24.05")
    assert [x.severity for x in f] == ["info"]
    assert "R535 >= 535.86" in f[0].message and "H100" in f[0].message
    older = stack.check_stack(gpu="H100", driver="535.54.03", container="ngc:24.05")
    assert any(x.severity == "warning" for x in older)  # below 535.86: minor-version compat only


def test_mig_minimum_driver_is_labelled_as_such():
    # MIG user guide: B200 R570 >= 570.133.20. A 535 driver predates Blackwell (error); a 570
    # driver below 570.133.20 only misses the MIG minimum (warning).
    e = [x for x in stack.check_stack(gpu="B200", driver="535.129.03") if x.severity == "error"]
    assert e and "MIG" in e[0].message and "R535" in e[0].message
    w = stack.check_stack(gpu="B200", driver="570.86.10")
    assert any(x.severity == "warning" and "MIG needs" in x.message for x in w)
    assert not any(x.severity == "error" for x in w)


def test_ib_failure_detection_with_nccl_defaults_is_about_34_s():
    # 4.096 us x 2^20 per attempt (NCCL_IB_TIMEOUT=20) for the first transmission and its
    # 7 retries (NCCL_IB_RETRY_CNT=7), each given up after one timeout
    assert stack.ib_failure_detection_s() == pytest.approx(4.096e-6 * 2 ** 20 * 8)
    assert 34 < stack.ib_failure_detection_s() < 35
    with pytest.raises(ValueError, match="NCCL_IB_RETRY_CNT"):
        stack.ib_failure_detection_s(20, 13)


def test_2026_variables_are_known_with_their_defaults():
    rows = stack.table("env_vars").set_index("name")
    expect = {"NCCL_MNNVL_ENABLE": "2", "NCCL_COLLNET_ENABLE": "0", "NCCL_NVLS_CHUNKSIZE": "131072",
              "NCCL_P2P_PXN_LEVEL": "2", "NCCL_IB_AR_THRESHOLD": "8192", "NCCL_RAS_ENABLE": "1",
              "TORCH_NCCL_HEARTBEAT_TIMEOUT_SEC": "480", "TORCH_NCCL_ASYNC_ERROR_HANDLING": "3",
              "TORCH_NCCL_TRACE_BUFFER_SIZE": "0", "CUDA_DEVICE_MAX_CONNECTIONS": "8"}
    for name, default in expect.items():
        assert rows.loc[name, "default"].split(" ")[0] == default, name
        assert "http" in rows.loc[name, "source"], name
    assert not stack.env_check({"NCCL_RAS_ENABLE": "1", "CUDA_DEVICE_MAX_CONNECTIONS": "1"})
    bad = stack.env_check({"CUDA_DEVICE_MAX_CONNECTIONS": "64"})
    assert bad and bad[0].severity == "error"
