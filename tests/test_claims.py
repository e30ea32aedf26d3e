"""companion.claims: the catalogue is well formed, every numeric check reaches the catalogue's
verdict, and the checks' numbers match the documents the catalogue cites."""
import math
from pathlib import Path

import pandas as pd
import pytest
import yaml

from companion import claims

ROOT = Path(__file__).resolve().parents[1]
SEEDS = Path("/work/shared/seeds")  # the seed posts live outside the repository
RAW = yaml.safe_load((ROOT / "data" / "claims.yaml").read_text(encoding="utf-8"))
IDS = [c["id"] for c in RAW]

#: Claims of a numeric kind that deliberately have no numeric check, and why.
UNCHECKED_NUMERIC_KINDS = {
    # A named hardware feature that no NVIDIA document mentions: nothing to compute.
    "micro-tile-scheduler",
    # Which FP8 format serves which tensor is a recipe fact (FP8 paper, TE Format.HYBRID), not
    # a number; the ranges themselves are checked under fp8-dynamic-range-large.
    "e4m3-storage-e5m2-compute",
    # A training-recipe claim answered by a paper's statement, not by a model quantity.
    "fp8-needs-2-4x-lower-lr",
}


def test_every_entry_has_exactly_the_schema_fields_in_order():
    for c in RAW:
        assert tuple(c) == claims.FIELDS, c.get("id")


@pytest.mark.parametrize("entry", RAW, ids=IDS)
def test_entry_enums_and_sources(entry):
    assert claims.validate(entry) is entry
    assert entry["chapter"] in claims.CHAPTERS
    assert entry["kind"] in claims.KINDS
    assert entry["expected_verdict"] in claims.VERDICTS
    assert all(" — http" in s for s in entry["sources"]), entry["sources"]
    if entry["kind"] == "spec":  # data/claims_README.md: a spec claim always has sources
        assert entry["sources"]


def test_ids_unique_and_kebab_case():
    assert len(set(IDS)) == len(IDS)
    assert all(i == i.lower() and " " not in i and "_" not in i for i in IDS)


@pytest.mark.skipif(not SEEDS.is_dir(), reason="seed posts not available on this machine")
def test_quotes_are_substrings_of_their_seed():
    for c in RAW:
        assert c["quote_zh"] in (SEEDS / f"{c['seed']}.txt").read_text(encoding="utf-8"), c["id"]


def test_validate_rejects_bad_entries():
    good = dict(RAW[0])
    with pytest.raises(ValueError, match="expected_verdict"):
        claims.validate({**good, "expected_verdict": "true"})
    with pytest.raises(ValueError, match="missing keys"):
        claims.validate({k: v for k, v in good.items() if k != "why"})
    with pytest.raises(ValueError, match="sources"):
        claims.validate({**good, "sources": ["a title without an address"]})


def test_which_claims_have_numeric_checks():
    kinds = {c["id"]: c["kind"] for c in RAW}
    checked = set(claims.checkable())
    for i, kind in kinds.items():
        if kind in claims.UNCHECKED_KINDS:
            assert i not in checked, f"{i} is {kind}: its verdict comes from the catalogue"
        elif i not in UNCHECKED_NUMERIC_KINDS:
            assert i in checked, f"{i} ({kind}) has no numeric check"
    assert not checked & UNCHECKED_NUMERIC_KINDS


@pytest.mark.parametrize("claim_id", claims.checkable())
def test_numeric_verdict_equals_catalogue(claim_id):
    # No deliberate disagreement: every computed verdict matches expected_verdict.
    check = claims.evaluate(claim_id)
    assert check.verdict == claims.claim(claim_id)["expected_verdict"], check.detail
    assert check.computed is not None and check.findings
    assert all(isinstance(f.agrees, bool) for f in check.findings)


def test_unchecked_claims_take_the_catalogue_verdict():
    for i in IDS:
        if i in claims.checkable():
            continue
        c = claims.evaluate(i)
        assert c.computed is None and c.claimed is None
        assert c.detail == claims.NOT_CHECKABLE
        assert c.verdict == claims.claim(i)["expected_verdict"]


def test_evaluate_all_table():
    df = claims.evaluate_all()
    assert list(df["id"]) == IDS
    for col in ("id", "chapter", "kind", "claimed", "computed", "verdict", "expected_verdict",
                "agree"):
        assert col in df.columns
    assert df["agree"].all(), df.loc[~df["agree"], ["id", "verdict", "expected_verdict"]]
    assert df["verdict"].isin(claims.VERDICTS).all()


def test_verdict_rule():
    F = claims.Finding
    assert claims.verdict_of([F("a", "b", True)]) == "correct"
    assert claims.verdict_of([F("a", "b", False)]) == "wrong"
    assert claims.verdict_of([F("a", "b", True), F("c", "d", False)]) == "partly-correct"
    assert claims.verdict_of([F("a", "b", True), F("c", "d", False, "framing")]) == "misleading"
    assert claims.verdict_of([F("c", "d", False, "framing")]) == "misleading"
    assert claims.verdict_of([F("a", "b", False), F("c", "d", True, "context")]) == "wrong"
    with pytest.raises(ValueError, match="at least one"):
        claims.verdict_of([F("c", "d", True, "context")])
    with pytest.raises(ValueError, match="role"):
        F("a", "b", True, "opinion")


def test_unknown_claim_is_named():
    with pytest.raises(ValueError, match="claim_id"):
        claims.evaluate("b200-headline-20pf")


def test_checks_match_the_cited_documents():
    e = claims.evaluate
    # NVIDIA DGX B200 User Guide: 1,440 GB over 8 GPUs = 180 per GPU; the registry reads the
    # vendor's GB as GiB, so 180 GiB is compared with the seed's 192 "GB" in the same unit.
    assert "180 of NVIDIA's HBM 'GB' (GiB; 193 GB) per GPU" in e("b200-headline-20pf-fp4-192gb").detail
    # NVIDIA NVFP4 blog, Figure 1: B200 9 dense / 18 sparse PFLOP/s FP4.
    assert e("b200-headline-20pf-fp4-192gb").computed == pytest.approx(18e15)
    assert e("b200-fp4-10pf-h100-fp8-1p98pf").computed == pytest.approx(9e15)
    # GB200 NVL72 product page: 1,440 PFLOP/s FP4 with sparsity for 72 GPUs, so 720 dense.
    assert e("nvl72-over-500pf-fp4").computed == pytest.approx(720e15)
    # Micikevicius et al. 2022 (arXiv:2209.05433), Table 1: E5M2 max 57344, min subnormal 2^-16.
    assert e("fp8-dynamic-range-large").computed == pytest.approx(math.log2(57344) + 16)
    # Llama 3 405B (Llama 3 paper, Table 3): 126 layers, 8 KV heads of 128 -> 516,096 B/token
    # in BF16 (2 x 126 x 8 x 128 x 2), linear in context.
    kv = e("kv-cache-grows-exponentially")
    assert "516,096 B per token" in kv.detail and kv.computed == 2
    # Narayanan et al. 2021 (arXiv:2104.04473): 163 TFLOP/s per A100 is 52% of peak.
    assert e("efficiency-70-to-90-percent").computed == pytest.approx(0.52, abs=0.005)
    # NVIDIA QM97xx manual: an NDR port is 400 Gb/s, 50 GB/s each way: 100 GB/s both ways.
    assert e("h100-nvlink-cross-node-900gbs").computed == pytest.approx(100e9)
    assert e("ndr-infiniband-200gbps").computed == pytest.approx(400e9)
    # Megatron-Core parallel_state: world % (etp * ep * pp) == 0; 9216 % (4 * 128 * 8) != 0.
    assert 9216 % (4 * 128 * 8) != 0 and 8192 % (4 * 128 * 8) == 0
    assert e("ep128-layout-divisibility").computed == "8,192 only"
    # Shoeybi et al. 2019, Section 5: 16 V100s per DGX-2H server.
    assert e("megatron-v100-8gpu-nvlink").computed == 16
    # The seed's own arithmetic: 1 - 1/1.93 = 48%; 3,800 GPU-h x 0.69 kW = 2,622 kWh.
    assert e("cluster-1p93x-means-60pct-less-power").computed == pytest.approx(1 - 38.4 / 74.2)
    assert "2,622 kWh" in e("b200-energy-54pct-from-assumed-gpu-hours").detail
    # 128 NVL72 racks x 72 GPUs (GB200 NVL72 product page).
    assert e("8192-gpus-in-128-nvl72").computed == 9216


def test_published_measurements_csv():
    df = pd.read_csv(ROOT / "data" / "published_measurements.csv")
    for col in ("id", "kind", "what", "hardware", "value", "unit", "label", "source"):
        assert col in df.columns
    assert df["id"].is_unique
    assert (df["label"] == "published").all()
    assert df["source"].str.contains("https://").all()
    rows = df.set_index("id")["value"]
    # The figures as the sources print them (see each row's source).
    assert rows["narayanan21-1t-a100"] == pytest.approx(163e12)
    assert rows["mamf-h100-sxm-bf16"] == pytest.approx(794.5e12)
    assert rows["nccl-tests-212-h100-allreduce-busbw"] == pytest.approx(480e9)


def test_no_import_cycle_between_claims_and_claims_checks():
    # claims imports claims_checks (lazily); claims_checks must never import claims back.
    import ast
    import companion.claims_checks as cc
    tree = ast.parse(open(cc.__file__, encoding="utf-8").read())
    imported = {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
    imported |= {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    names = {a.name for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)
             and n.module == "companion" for a in n.names}
    assert "companion.claims" not in imported and "claims" not in names
    assert claims.Finding is cc.Finding and set(claims.checkable()) <= set(claims.CHECKS)
