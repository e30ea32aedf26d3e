"""Unit conversions, checked against figures printed in vendor documents."""
import math

import pytest

from companion import units as u


def test_decimal_and_binary_gigabytes_differ():
    assert u.gb(80) == 80e9
    assert u.gib(80) == 80 * 2**30 == 85_899_345_920
    # nvidia-smi shows 81559 MiB on an "H100 80GB HBM3": the printed 80 GB is binary-sized.
    reported = 81559 * u.MiB
    assert abs(reported - u.gib(80)) / u.gib(80) < 0.01
    assert abs(reported - u.gb(80)) / u.gb(80) > 0.06
    assert u.to_gib(u.gb(80)) == pytest.approx(74.506, rel=1e-4)
    assert u.to_gb(u.gib(1)) == pytest.approx(1.073741824)
    assert u.tb(1) == 1e12 and u.tib(1) == 2**40
    assert u.to_tb(u.tb(3.5)) == pytest.approx(3.5)


def test_network_rates_are_bits_per_direction():
    # NVIDIA MMA4Z00-NS transceiver spec: NDR InfiniBand / 400GbE line rate is 400 Gb/s.
    assert u.gbit_per_s(400) == 50e9
    # XDR / ConnectX-8: 800 Gb/s.
    assert u.gbit_per_s(800) == 100e9
    assert u.to_gbit_per_s(50e9) == 400


def test_line_rate_with_encoding():
    # PCIe 5.0: 32 GT/s per lane, 16 lanes, 128b/130b coding.
    assert u.line_rate_Bps(32 * 16, u.ENCODING_128B130B) == pytest.approx(63.015e9, rel=1e-4)
    # PCIe 4.0: 16 GT/s -> 31.5 GB/s per direction for x16 after coding.
    assert u.line_rate_Bps(16 * 16, u.ENCODING_128B130B) == pytest.approx(31.5e9, rel=1e-3)
    assert u.line_rate_Bps(100) == 12.5e9


def test_bidirectional_is_twice_per_direction():
    # NVIDIA HGX H100 blog: "NVLink bidirectional speed of 900 GB/s" -> 450 GB/s each way.
    assert u.per_direction(900e9) == 450e9
    # GB200 NVL72 table: NVLink 5 "1.8TB/s"; Verda: "900 GB/s unidirectional".
    assert u.per_direction(u.tb_per_s(1.8)) == 900e9
    assert u.bidirectional(450e9) == 900e9
    assert u.gb_per_s(450) == 450e9


def test_flops_prefixes_and_sparse_headlines():
    assert u.tflops(989.4) == pytest.approx(989.4e12)
    assert u.pflops(2.25) == 2.25e15
    assert u.to_tflops(989.4e12) == pytest.approx(989.4)
    assert u.to_pflops(9e15) == 9
    # H100 datasheet: BF16 "1,979 TFLOPS*" with "* Shown with sparsity"; dense is half.
    assert u.dense_from_sparse(1979e12) == pytest.approx(989.5e12)
    # GB300 NVL72: FP4 1,440 PF sparse, 1,080 PF dense, a factor of 4/3 rather than 2.
    assert u.dense_from_sparse(1440e15, factor=1440 / 1080) == pytest.approx(1080e15)


def test_si_formatting():
    assert u.si(989.4e12, "FLOP/s") == "989 TFLOP/s"
    assert u.si(3.35e12, "B/s") == "3.35 TB/s"
    assert u.si(0, "W") == "0 W"
    assert u.si(1400, "W", digits=2) == "1.4 kW"


@pytest.mark.parametrize("bad", [-1, math.inf, math.nan])
def test_bad_values_raise_value_error(bad):
    with pytest.raises(ValueError, match="x"):
        u.gb(bad)


def test_bad_types_raise_type_error():
    with pytest.raises(TypeError, match="x"):
        u.gib("80")
    with pytest.raises(TypeError, match="unit"):
        u.si(1.0, 5)


def test_efficiency_and_factor_ranges():
    with pytest.raises(ValueError, match="efficiency"):
        u.line_rate_Bps(100, 1.2)
    with pytest.raises(ValueError, match="efficiency"):
        u.line_rate_Bps(100, 0)
    with pytest.raises(ValueError, match="factor"):
        u.dense_from_sparse(1e15, factor=0.5)


def test_mebibytes_as_nvidia_smi_prints_them():
    # nvidia-smi memory.total on an H100 80GB HBM3: 81559 MiB (NVIDIA/nccl#1264), which is
    # 79.65 GiB and 85.52 GB: less than the 80 GiB the registry reads "80 GB" as.
    assert u.mib(81559) == 81559 * 2**20
    assert u.to_gib(u.mib(81559)) == pytest.approx(79.647, abs=1e-3)
    assert u.to_gb(u.mib(81559)) == pytest.approx(85.52, abs=0.01)
    assert u.to_mib(u.gib(80)) == 81920
    assert "GB = 10^9" in u.BYTE_CONVENTION and "GiB = 2^30" in u.BYTE_CONVENTION


@pytest.mark.parametrize("value, unit, text", [(999.96e9, "B", "1 TB"), (999.6e12, "FLOP/s", "1 PFLOP/s"),
                                              (-999.9e9, "B", "-1 TB"), (989.4e12, "FLOP/s", "989 TFLOP/s")])
def test_si_picks_the_prefix_of_the_rounded_value(value, unit, text):
    # three significant digits of 999.96e9 are 1.00e12: one terabyte, not "1e+03 GB"
    assert u.si(value, unit) == text


@pytest.mark.parametrize("value, digits, text", [(150e9, 2, "150 GB"), (99.96e9, 2, "100 GB"),
                                                 (20e9, 1, "20 GB"), (1.5e9, 2, "1.5 GB")])
def test_si_never_prints_an_exponent_for_a_prefixed_value(value, digits, text):
    # fewer digits than the value has before its point: the integer, not "1.5e+02 GB"
    assert u.si(value, "B", digits) == text


def test_mib_refuses_an_overflow_like_the_other_converters():
    assert u.mib(81559) == 81559 * 2**20  # an H100's driver-visible total
    with pytest.raises(ValueError, match="too large"):
        u.mib(1e308)
