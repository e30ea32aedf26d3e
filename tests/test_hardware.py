"""The hardware registry against the figures printed in its cited documents.

Each test names the document a figure comes from; the CSVs in data/hardware/ cite the URLs.
"""
import pytest

from companion import hardware as hw
from companion import units as u

GPU_KEYS = ("v100_sxm2", "a100_sxm_80gb", "h100_sxm", "h200_sxm", "b200_hgx", "b200_gb200",
            "b300_hgx", "b300_gb300", "mi300x", "mi325x", "mi355x")


# --- every row is cited ---------------------------------------------------------------------

@pytest.mark.parametrize("table", [hw.gpus, hw.links, hw.systems, hw.gpu_details])
def test_every_row_has_a_source_with_a_url_and_notes(table):
    frame = table()
    assert frame["key"].is_unique
    for row in frame.itertuples():
        assert isinstance(row.source, str) and "https://" in row.source, row.key
        assert isinstance(row.notes, str) and len(row.notes) > 20, row.key


def test_the_issue_s_products_are_all_present():
    assert set(GPU_KEYS) <= set(hw.gpus()["key"])
    for key in ("nvlink1", "nvlink2", "nvlink3", "nvlink4", "nvlink5", "nv_hbi", "nvlink_c2c",
                "nvl72_domain", "pcie4_x16", "pcie5_x16", "pcie6_x16", "ib_hdr", "ib_ndr",
                "ib_ndr200", "ib_xdr", "connectx7", "connectx8", "eth_400g", "eth_800g"):
        assert hw.link(key).key == key
    for key in ("dgx_h100", "dgx_h200", "dgx_b200", "gb200_nvl72", "gb300_nvl72"):
        assert hw.system(key).key == key


def test_columns_state_units_and_conventions():
    cols = set(hw.gpus().columns)
    for p in hw.PRECISIONS:
        assert hw._dense_column(p) in cols
    assert {"hbm_bytes", "hbm_printed", "hbm_Bps", "tdp_w", "scaleup_per_direction_Bps",
            "bf16_sparse_flops", "fp4_sparse_flops"} <= cols
    assert "per_direction_Bps" in hw.links().columns


# --- dense versus sparse ---------------------------------------------------------------------

def test_h100_dense_and_sparse_cannot_be_confused():
    # H100 datasheet, SXM: BF16 1,979 and FP8 3,958 TFLOPS "shown with sparsity";
    # Lockwood's table: 989.4 / 1978.9 (BF16) and 1978.9 / 3957.8 (FP8) dense / sparse.
    h100 = hw.gpu("H100")
    assert h100.peak_flops("bf16") == 989.4e12
    assert h100.peak_flops("bf16", sparse=True) == 1978.9e12
    assert h100.peak_flops("fp8") == 1978.9e12
    assert h100.peak_flops("fp8", sparse=True) == 3957.8e12
    assert h100.peak_flops("tf32") == 494.7e12
    assert round(h100.peak_flops("bf16", sparse=True) / 1e12) == 1979
    assert h100.peak_flops("bf16") < 1.5e15


def test_a100_mfu_denominator_is_dense():
    # A100 datasheet: BF16 312 TFLOPS, 624 "with sparsity". Dividing by 624 halves MFU.
    a100 = hw.gpu("A100")
    assert a100.peak_flops("bf16") == 312e12
    assert a100.peak_flops("bf16", sparse=True) == 624e12


def test_hgx_b200_precision_ladder():
    # NVIDIA GB200 NVL72 page, HGX B200 column (sparse): FP4 18, FP8/FP6 9, BF16 4.5 PF.
    b200 = hw.gpu("B200")
    assert b200.peak_flops("bf16") == 2.25e15
    assert b200.peak_flops("fp8") == 4.5e15
    assert b200.peak_flops("fp6") == b200.peak_flops("fp8")
    assert b200.peak_flops("fp4") == 9e15
    assert b200.peak_flops("fp4", sparse=True) == 18e15
    # DGX B200: FP4 144 PFLOPS sparse / 72 dense for 8 GPUs; FP8 72 PFLOPS (sparse).
    dgx = hw.system("DGX B200")
    assert dgx.peak_flops("fp4") == pytest.approx(72e15)
    assert dgx.peak_flops("fp4", sparse=True) == pytest.approx(144e15)
    assert dgx.peak_flops("fp8", sparse=True) == pytest.approx(72e15)


def test_the_20_pflops_headline_is_gb200_sparse_fp4():
    # GB200 NVL72 table: per GPU FP4 20 PF (sparse), rack 1,440 PF FP4 and 720 PF FP8.
    gb200 = hw.gpu("GB200")
    assert gb200.peak_flops("fp4", sparse=True) == 20e15
    assert gb200.peak_flops("fp4") == 10e15
    assert gb200.peak_flops("bf16") == 2.5e15
    rack = hw.system("GB200 NVL72")
    assert rack.peak_flops("fp4", sparse=True) == pytest.approx(1440e15)
    assert rack.peak_flops("fp8", sparse=True) == pytest.approx(720e15)
    # Eight-fold down the ladder from the headline to dense BF16 on an HGX B200.
    assert 20e15 / hw.gpu("B200").peak_flops("bf16") == pytest.approx(8.89, rel=1e-2)


def test_blackwell_ultra_fp4_sparsity_is_not_2x():
    # NVIDIA Blackwell Ultra blog: 15 PFLOPS dense NVFP4; GB300 NVL72: 1,440 | 1,080 PF FP4.
    gb300 = hw.gpu("GB300")
    assert gb300.peak_flops("fp4") == 15e15
    assert gb300.peak_flops("fp4", sparse=True) == 20e15
    assert gb300.sparsity_factor("fp4") == pytest.approx(4 / 3)
    assert gb300.sparsity_factor("fp8") == 2
    assert 72 * gb300.peak_flops("fp4") == pytest.approx(1080e15)
    # HGX B300: FP4 144 PF sparse, 105 PF dense per 8 GPUs.
    b300 = hw.gpu("B300")
    assert 8 * b300.peak_flops("fp4") == pytest.approx(105e15)
    assert 8 * b300.peak_flops("fp4", sparse=True) == pytest.approx(144e15)


def test_sparsity_is_2x_except_the_documented_exceptions():
    odd = set()
    for key in GPU_KEYS:
        g = hw.gpu(key)
        for p in g.sparse_precisions():
            assert g.peak_flops(p, sparse=True) > g.peak_flops(p)
            # Vendors round each figure: 1978.9 / 989.4 is 2 within 0.1%.
            if abs(g.sparsity_factor(p) - 2) > 2e-3:
                odd.add((key, p))
    assert odd == {("b300_hgx", "fp4"), ("b300_gb300", "fp4")}


def test_sparse_where_none_is_published_raises():
    with pytest.raises(ValueError, match="sparse peaks exist for: bf16"):
        hw.gpu("MI355X").peak_flops("fp4", sparse=True)
    with pytest.raises(ValueError, match="none"):
        hw.gpu("V100").peak_flops("fp16", sparse=True)
    with pytest.raises(TypeError, match="sparse"):
        hw.gpu("H100").peak_flops("bf16", sparse="yes")


def test_missing_precisions_name_what_the_gpu_has():
    with pytest.raises(ValueError, match=r"V100 .* no bf16 .*fp16"):
        hw.gpu("V100").peak_flops("bf16")
    with pytest.raises(ValueError, match=r"no fp8 peak; it has: .*bf16"):
        hw.gpu("A100").peak_flops("fp8")
    with pytest.raises(ValueError, match="no fp4"):
        hw.gpu("H100").peak_flops("fp4")
    with pytest.raises(ValueError, match="allowed: fp64"):
        hw.gpu("H100").peak_flops("fp12")
    assert hw.gpu("V100").precisions() == ("fp64", "fp16")
    assert hw.gpu("H100").peak_flops("BF16") == hw.gpu("H100").peak_flops("bfloat16")


# --- memory ---------------------------------------------------------------------------------

def test_b200_hbm_is_not_5_tb_per_s():
    # HGX B200 per-GPU table: 180 GB, 7.7 TB/s; DGX B200: 64 TB/s per 8 GPUs;
    # pytorch/ao #4002: 7680-bit bus x 3996 MHz x 2 = 7.67 TB/s.
    b200 = hw.gpu("B200")
    assert b200.hbm_Bps == 7.7e12
    assert b200.hbm_Bps == pytest.approx(7680 / 8 * 3996e6 * 2, rel=0.01)
    assert b200.hbm_Bps == pytest.approx(64e12 / 8, rel=0.05)
    assert b200.hbm_printed == "180 GB"


def test_hbm_capacity_reads_gb_as_gib():
    # ROCm's architecture table prints MI300X memory as 192 GiB; nvidia-smi shows 81559 MiB
    # on an H100 "80 GB".
    assert hw.gpu("MI300X").hbm_bytes == u.gib(192)
    assert hw.gpu("H100").hbm_bytes == u.gib(80)
    assert 81559 * u.MiB <= hw.gpu("H100").hbm_bytes


def test_memory_bandwidths_from_datasheets():
    assert hw.gpu("H100").hbm_Bps == 3.35e12      # H100 datasheet
    assert hw.gpu("H200").hbm_Bps == 4.8e12       # H200 datasheet
    assert hw.gpu("A100").hbm_Bps == 2039e9       # A100 80GB datasheet
    assert hw.gpu("MI300X").hbm_Bps == 5.3e12     # AMD MI300X
    assert hw.gpu("MI325X").hbm_Bps == 6e12       # AMD MI325X
    assert hw.gpu("GB300").hbm_Bps == 8e12        # Blackwell Ultra blog


def test_ridge_point_and_flops_per_watt():
    h100 = hw.gpu("H100")
    assert h100.ridge_point("bf16") == pytest.approx(989.4e12 / 3.35e12)
    assert h100.flops_per_watt("bf16") == pytest.approx(989.4e12 / 700)
    assert h100.ridge_point("bf16", sparse=True) == pytest.approx(2 * h100.ridge_point("bf16"), rel=1e-3)


# --- links: per direction versus bidirectional ----------------------------------------------

def test_nvlink_generations_per_direction():
    # NVIDIA NVLink table: 300 / 600 / 900 GB/s (bidirectional) for gen 2 / 3 / 4;
    # GB200 NVL72 page: NVLink 5 1.8 TB/s.
    for key, printed in (("nvlink2", 300e9), ("nvlink3", 600e9), ("nvlink4", 900e9),
                         ("nvlink5", 1.8e12)):
        lk = hw.link(key)
        assert lk.printed_convention == "bidirectional"
        assert lk.printed_Bps == printed
        assert lk.per_direction_Bps == printed / 2
        assert lk.bidirectional_Bps == printed


def test_gpu_scaleup_is_per_direction():
    assert hw.gpu("H100").scaleup_Bps == 450e9
    assert hw.gpu("H100").scaleup_bidirectional_Bps == 900e9
    assert hw.gpu("B200").scaleup_Bps == 900e9
    assert hw.gpu("A100").scaleup_Bps == hw.link("nvlink3").per_direction_Bps
    # MI355X: 7 Infinity Fabric links of 153.6 GB/s bidirectional (Hume Consulting), per direction
    # 7 x 76.8 GB/s; a secondary figure, so flagged unverified.
    assert hw.gpu("MI355X").scaleup_Bps == pytest.approx(7 * 153.6e9 / 2)
    assert not hw.gpu("MI355X").is_verified("scaleup_Bps")


def test_measured_nvlink_is_below_the_per_direction_peak():
    # NVIDIA/nccl#1264: p2pBandwidthLatencyTest on H100 SXM, 380 GB/s one way of 450.
    lk = hw.link("NVLink 4")
    assert lk.achievable_per_direction_Bps == 380e9 < lk.per_direction_Bps


def test_nv_hbi_is_the_die_to_die_link_not_nvlink():
    # Blackwell Ultra blog: "NV-HBI ... provides 10 TB/s of bandwidth" between the two dies.
    hbi = hw.link("NV-HBI")
    assert hbi.category == "die-to-die"
    assert hbi.printed_Bps == 10e12
    assert hbi.per_direction_Bps is None
    assert hw.link("NVLink 5").printed_Bps < hbi.printed_Bps / 5


def test_link_tables_are_self_consistent():
    for row in hw.links().itertuples():
        lk = hw.link(row.key)
        if lk.printed_convention == "bidirectional":
            assert lk.bidirectional_Bps == pytest.approx(lk.printed_Bps, rel=0.01), row.key
        elif lk.printed_convention == "per direction":
            assert lk.per_direction_Bps == lk.printed_Bps, row.key


def test_network_ports():
    # NVIDIA transceiver docs: NDR 400 Gb/s on 4 x 100G PAM4; NDR200 on 2 lanes.
    assert hw.link("NDR").per_direction_Bps == u.gbit_per_s(400)
    assert hw.link("NDR200").per_direction_Bps == u.gbit_per_s(200)
    assert hw.link("XDR").per_direction_Bps == u.gbit_per_s(800)
    assert hw.link("ConnectX-7").per_direction_Bps == 50e9
    # H100 datasheet: "PCIe Gen5: 128GB/s" is both directions.
    assert hw.link("PCIe Gen5").per_direction_Bps == 64e9


# --- identity, names, systems ---------------------------------------------------------------

def test_compute_capabilities():
    # NVIDIA "CUDA GPU Compute Capability": B200/GB200 10.0, B300/GB300 10.3, H100/H200 9.0.
    expect = {"V100": "7.0", "A100": "8.0", "H100": "9.0", "H200": "9.0", "B200": "10.0",
              "GB200": "10.0", "B300": "10.3", "GB300": "10.3", "MI300X": "gfx942",
              "MI355X": "gfx950"}
    for name, cc in expect.items():
        assert hw.gpu(name).compute_capability == cc


@pytest.mark.parametrize("name", ["H100", "h100-sxm", "H100 SXM5", "h100_sxm", " nvidia h100 "])
def test_forgiving_names(name):
    assert hw.gpu(name).key == "h100_sxm"


def test_b200_means_hgx_and_gb200_means_1200_w():
    assert hw.gpu("B200").tdp_w == 1000
    assert hw.gpu("GB200").tdp_w == hw.gpu("B200 (GB200)").tdp_w == 1200
    assert hw.gpu("GB300").key == "b300_gb300" and hw.gpu("B300").key == "b300_hgx"
    assert hw.gpu(hw.gpu("H100")) is hw.gpu("H100")


def test_unknown_names_suggest_close_matches():
    with pytest.raises(ValueError, match=r"unknown gpu 'H10O'.*Did you mean 'H100'"):
        hw.gpu("H10O")
    with pytest.raises(ValueError, match="Did you mean"):
        hw.link("NVLnk 5")
    with pytest.raises(ValueError, match="unknown system"):
        hw.system("DGX Z9000")
    with pytest.raises(TypeError, match="gpu name must be a string"):
        hw.gpu(100)


def test_systems_from_vendor_documents():
    dgx = hw.system("DGX H100")
    assert (dgx.gpu().key, dgx.gpu_count, dgx.max_power_w) == ("h100_sxm", 8, 10200)
    assert dgx.scaleout_Bps == 8 * 50e9
    b200 = hw.system("dgx-b200")                 # DGX B200: 14.3 kW, 1,440 GB, 2 NVSwitch
    assert b200.max_power_w == 14300 and b200.hbm_total_printed == "1,440 GB"
    nvl72 = hw.system("GB200 NVL72")             # 72 GPUs, 36 Grace, one NVLink domain
    assert (nvl72.gpu_count, nvl72.cpu_count, nvl72.scaleup_domain_gpus) == (72, 36, 72)
    assert hw.system("GB300 NVL72").max_power_w is None
    assert hw.system("DGX B200").hbm_bytes == 8 * hw.gpu("B200").hbm_bytes


# --- issue 14: new rows, TF32 stored one way, driver-visible capacity, unverified fields -----

def test_h100_pcie_matches_its_datasheet_column():
    # NVIDIA H100 datasheet, H100 PCIe column: 114 SMs, BF16 1,513* / FP8 3,026* / TF32 756*
    # TFLOPS (* with sparsity), FP64 26, 2,000 GB/s, 50 MB L2; product brief: 350 W maximum.
    g = hw.gpu("H100 PCIe")
    assert g.key == "h100_pcie" and g.sm_count == 114 and g.tdp_w == 350
    assert g.peak_flops("bf16", sparse=True) == 1513e12
    assert g.peak_flops("bf16") == 1513e12 / 2
    assert g.peak_flops("fp8", sparse=True) == 3026e12
    assert g.peak_flops("tf32", sparse=True) == 756e12
    assert g.peak_flops("fp64") == 26e12
    assert g.hbm_Bps == 2.0e12 and g.hbm_type == "HBM2e"
    assert g.llc_bytes == 50 * u.MiB


def test_h100_nvl_h200_nvl_gh200_rows_store_only_what_was_found():
    # NVIDIA H100 page: NVL 1,671 TFLOPS sparse BF16 (torchtitan rounds the dense half to 835e12);
    # MLPerf v4.0: 94 GB HBM3, 600 GB/s NVLink.
    nvl = hw.gpu("H100 NVL")
    assert nvl.peak_flops("bf16", sparse=True) == 1671e12 and nvl.hbm_bytes == 94 * u.GiB
    assert nvl.peak_flops("bf16") == pytest.approx(835e12, rel=1e-3)
    assert nvl.scaleup_bidirectional_Bps == 600e9
    with pytest.raises(ValueError, match="no fp8 peak"):
        nvl.peak_flops("fp8")
    assert not nvl.is_verified("tdp_w") and not nvl.is_verified("sm_count")
    # H200 NVL: 141 GB at 4.8 TB/s, 600 W (secondary); NVIDIA's H200 page: 1,671 TFLOPS sparse
    # BF16 (quoted in allenai/OLMo-core#810); no FP8 figure found -> raises.
    h200nvl = hw.gpu("H200 NVL")
    assert h200nvl.hbm_bytes == hw.gpu("H200").hbm_bytes and h200nvl.tdp_w == 600
    assert h200nvl.peak_flops("bf16", sparse=True) == 1671e12
    with pytest.raises(ValueError, match="no fp8 peak"):
        h200nvl.peak_flops("fp8")
    with pytest.raises(ValueError, match="no document with its tensor peaks"):
        hw.gpu("GH200").peak_flops("bf16")
    # GH200 (MLPerf v4.1: 'GH200 Grace Hopper Superchip 144GB', HBM3e): no GPU TDP, no bandwidth.
    gh = hw.gpu("GH200")
    assert gh.key == "gh200_144gb" and gh.hbm_bytes == 144 * u.GiB and gh.tdp_w is None
    with pytest.raises(ValueError, match="no published hbm_Bps"):
        gh.need("hbm_Bps")
    assert hw.gpu("H100").key == "h100_sxm"  # the bare name still means SXM


def test_b200_and_b300_tf32_are_stored_the_same_way():
    # HGX platform table: TF32 18 PFLOPS with sparsity per 8 GPUs, for HGX B200 and HGX B300.
    for name in ("B200", "B300"):
        g = hw.gpu(name)
        assert g.peak_flops("tf32", sparse=True) == pytest.approx(18e15 / 8)
        assert g.peak_flops("tf32") == pytest.approx(g.peak_flops("bf16") / 2)


def test_driver_visible_capacity_is_what_nvidia_smi_prints():
    # nvidia-smi memory.total: H100 80GB HBM3 81559 MiB (NVIDIA/nccl#1264), H200 143771 MiB,
    # B200 183359 MiB (NVIDIA/TensorRT-LLM#10278).
    for name, mib in (("H100", 81559), ("H200", 143771), ("B200", 183359)):
        g = hw.gpu(name)
        assert g.hbm_visible_bytes == mib * u.MiB
        assert g.usable_hbm_bytes == mib * u.MiB < g.hbm_bytes
    assert hw.gpu("MI300X").usable_hbm_bytes == hw.gpu("MI300X").hbm_bytes  # none published


def test_last_level_caches_are_sourced():
    # deviceQuery: H100 'L2 Cache Size: 52428800 bytes'; pytorch/ao#4002: B200 126.50 MB;
    # AMD MI300X: 256 MB Infinity Cache at 17 TB/s peak.
    assert hw.gpu("H100").llc_bytes == 52428800
    assert hw.gpu("B200").llc_bytes == pytest.approx(126.5 * u.MiB)
    mi = hw.gpu("MI300X")
    assert mi.llc_name.startswith("Infinity Cache") and mi.llc_bytes == 256 * u.MiB
    assert mi.llc_Bps == 17e12
    assert hw.gpu("H100").llc_Bps is None  # NVIDIA publishes no L2 bandwidth
    details = hw.gpu_details()
    assert set(details["key"]) <= set(hw.gpus()["key"])
    assert all("https://" in s for s in details["source"])


def test_b300_sm_count_is_marked_unverified_and_its_memory_is_the_datasheets():
    b300 = hw.gpu("B300")
    # NVIDIA's DGX B300 reference architecture (dgxc-benchmarking README): 1100 W, 270 GB and
    # 7.7 TB/s per GPU; the Blackwell Ultra datasheet's GB300 column: 279 GB and 8 TB/s
    assert b300.tdp_w == 1100 and b300.is_verified("tdp_w")
    assert b300.hbm_bytes == 270 * 2 ** 30 and b300.hbm_Bps == 7.7e12
    assert hw.gpu("GB300").hbm_bytes == 279 * 2 ** 30
    assert b300.sm_count == 160 and not b300.is_verified("sm_count")
    assert hw.gpu("B200").is_verified("tdp_w")
    with pytest.raises(ValueError, match="unknown field .watts."):
        b300.is_verified("watts")


def test_amd_generations_are_separate_families():
    # MI300X and MI325X are CDNA 3 (gfx942); MI355X is CDNA 4 (gfx950), with other matrix
    # rates and OCP rather than FNUZ FP8: a CDNA 3 record must not stand in for it
    assert hw.gpu("MI300X").family == hw.gpu("MI325X").family == "AMD CDNA 3"
    assert hw.gpu("MI355X").family == "AMD CDNA 4"
    assert hw.gpu("B300").family == hw.gpu("B200").family == "NVIDIA Blackwell"


def test_field_lookups_name_the_field():
    h100 = hw.gpu("H100")
    with pytest.raises(ValueError, match="Did you mean 'sm_count'"):
        h100.need("sm_cnt")
    with pytest.raises(TypeError, match="field must be"):
        h100.is_verified(["tdp_w"])
