"""The seeds' claims (``data/claims.yaml``), each checked with the companion's own numbers.

A check registered for a claim id (in ``companion.claims_checks``) recomputes what the
claim is about (a registry figure, a roofline, an alpha-beta collective, an energy product)
and compares it with what the seed says. Each comparison is a :class:`Finding` with a role:

- ``figure``: a number or fact the seed states (agrees within :data:`TOLERANCE`, or not);
- ``framing``: whether the conclusion the seed draws survives a like-for-like comparison
  (same precision, same convention, the seed's own inputs);
- ``context``: shown for the reader, never counted.

:func:`verdict_of` turns findings into a verdict: ``wrong`` if no stated figure agrees,
``partly-correct`` if some do and some do not, ``misleading`` if the figures hold (or there
are none) but a framing fails, ``correct`` otherwise. Claims about code, software or opinion
get no numeric check: their verdict is the catalogue's, with ``computed=None``.
"""
from __future__ import annotations

import functools
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from companion import checks, units

CLAIMS_PATH = Path(__file__).resolve().parents[1] / "data" / "claims.yaml"

FIELDS = ("id", "seed", "chapter", "quote_zh", "quote_en", "claim", "kind", "check",
          "expected_verdict", "why", "sources")
CHAPTERS = ("hardware", "low_precision", "memory", "interconnect", "parallelism", "power",
            "pitfalls")
KINDS = ("spec", "arithmetic", "code", "software", "measurement", "opinion")
VERDICTS = ("correct", "wrong", "misleading", "unverifiable", "partly-correct")
ROLES = ("figure", "framing", "context")
#: Kinds whose verdict comes from the catalogue (there is no number to recompute).
UNCHECKED_KINDS = ("code", "software", "opinion")
NOT_CHECKABLE = "not numerically checkable: see why"

#: Relative tolerance within which a seed's figure agrees (datasheets round to 2-3 digits).
TOLERANCE = 0.03

#: B100 is not in the registry (no NVIDIA document was found); its dense FP8 peak comes from a
#: third-party table cited in data/claims.yaml: hmc-tech (unofficial spec database), "NVIDIA
#: B200 vs NVIDIA B100" (B100 700 W: 3.5 PFLOP/s dense FP8),
#: https://hmc-tech.com/gpus/nvidia-b200-vs-nvidia-b100
B100_FP8_DENSE_FLOPS_THIRD_PARTY = 3.5e15

#: Shoeybi et al. 2019, "Megatron-LM: Training Multi-Billion Parameter Language Models Using
#: Model Parallelism", Section 5, https://arxiv.org/abs/1909.08053 : DGX-2H servers of 16
#: V100s, "300 GB/sec bandwidth between GPUs inside a server via NVSwitch and 100 GB/sec of
#: interconnect bandwidth between servers using 8 InfiniBand adapters per server".
SHOEYBI_GPUS_PER_SERVER = 16
SHOEYBI_INTRA_SERVER_Bps = 300e9
SHOEYBI_INTER_SERVER_Bps = 100e9

#: NVIDIA DGX B200 User Guide, "Introduction to NVIDIA DGX B200 Systems" (10U rackmount),
#: https://docs.nvidia.com/dgx/dgxb200-user-guide/introduction-to-dgxb200.html
DGX_B200_RACK_UNITS = 10

#: Bytes per token id in Megatron-Core's indexed datasets: uint16 below a vocabulary of
#: 65,500, else int32 (DType.optimal_dtype in megatron/core/datasets/indexed_dataset.py,
#: https://github.com/NVIDIA/Megatron-LM); 4 bytes bounds the input stream of a text model.
TOKEN_ID_BYTES = 4

# The third seed's own inputs (003_2bd5c6d5d3a69ced): 0.69 kW per H100 under load, 8.5 kW per
# 8-GPU node, industrial electricity at 0.8 yuan/kWh.
SEED_GPU_KW = 0.69
SEED_NODE_KW = 8.5
SEED_YUAN_PER_KWH = 0.8
# The same seed's 13B run: "3,800 GPU-hours" on 128 H100 in FP8 (the 54% argument), "3.5 days"
# for 300B tokens on the same 128 H100 and "1.5 days" on B200 (its advice section).
SEED_13B_H100_GPU_HOURS = 3800
SEED_13B_H100_DAYS, SEED_13B_B200_DAYS = 3.5, 1.5

HOUR_S = 3600.0
DAY_S = 86400.0


@dataclass(frozen=True)
class Finding:
    """One comparison: what the seed says, what the companion finds, and whether they agree."""

    said: str
    found: str
    agrees: bool
    role: str = "figure"

    def __post_init__(self):
        checks.choice("role", self.role, ROLES)
        if not isinstance(self.agrees, (bool, np.bool_)):
            raise TypeError(f"agrees must be a bool; got {self.agrees!r}")
        object.__setattr__(self, "agrees", bool(self.agrees))  # numpy bools compare oddly


@dataclass(frozen=True)
class ClaimCheck:
    """A claim's headline figure as claimed and as computed (SI units, see ``unit``), the
    verdict the findings give and a one-line ``detail``. ``computed`` is None for claims that
    are not numerically checkable; then the verdict is the catalogue's."""

    id: str
    claimed: float | str | None
    computed: float | str | None
    unit: str
    verdict: str
    detail: str
    findings: tuple[Finding, ...] = ()


def verdict_of(findings) -> str:
    """Verdict of a list of :class:`Finding` (rule in the module docstring)."""
    findings = list(findings)
    figures = [f.agrees for f in findings if f.role == "figure"]
    framings = [f.agrees for f in findings if f.role == "framing"]
    if not figures and not framings:
        raise ValueError("a check needs at least one figure or framing finding")
    if figures and not any(figures):
        return "wrong"
    if not all(figures):
        return "partly-correct"
    return "misleading" if not all(framings) else "correct"


def validate(entry) -> dict:
    """Check one catalogue entry (keys, enums, types); return it or raise ValueError."""
    if not isinstance(entry, dict):
        raise TypeError(f"a claim must be a mapping; got {type(entry).__name__}")
    name = entry.get("id", "<no id>")
    missing = [k for k in FIELDS if k not in entry]
    extra = [k for k in entry if k not in FIELDS]
    if missing or extra:
        raise ValueError(f"claim {name!r}: missing keys {missing}, unknown keys {extra}")
    for key in FIELDS[:-1]:
        if not isinstance(entry[key], str) or not entry[key].strip():
            raise ValueError(f"claim {name!r}: {key} must be a non-empty string")
    checks.choice(f"{name}.chapter", entry["chapter"], CHAPTERS)
    checks.choice(f"{name}.kind", entry["kind"], KINDS)
    checks.choice(f"{name}.expected_verdict", entry["expected_verdict"], VERDICTS)
    if not isinstance(entry["sources"], list) or not all(
            isinstance(s, str) and "http" in s for s in entry["sources"]):
        raise ValueError(f"claim {name!r}: sources must be a list of strings with a URL")
    return entry


@functools.cache
def _catalogue(path=CLAIMS_PATH):
    import yaml

    with open(path, encoding="utf-8") as f:
        entries = [validate(e) for e in yaml.safe_load(f)]
    ids = [e["id"] for e in entries]
    if len(set(ids)) != len(ids):
        raise ValueError(f"{path}: duplicate ids {sorted({i for i in ids if ids.count(i) > 1})}")
    return {e["id"]: e for e in entries}


def load() -> list[dict]:
    """Every catalogue entry, in file order (copies: edits do not leak into the cache)."""
    return [dict(e) for e in _catalogue().values()]


def claim(claim_id: str) -> dict:
    """The catalogue entry ``claim_id``."""
    table = _catalogue()
    checks.choice("claim_id", claim_id, list(table))
    return dict(table[claim_id])


_CHECKS = {}


def _check(claim_id, unit):
    """Register ``fn() -> (claimed, computed, findings)`` as the check of ``claim_id``."""
    def register(fn):
        if claim_id in _CHECKS:
            raise ValueError(f"claim {claim_id!r} has two checks")
        _CHECKS[claim_id] = (fn, unit)
        return fn
    return register


def _registered() -> dict:
    # The checks live in companion.claims_checks, which imports this module: importing it
    # here, on first use, rather than at the top avoids the cycle.
    from companion import claims_checks  # noqa: F401  (registers the checks)

    return _CHECKS


def checkable() -> tuple[str, ...]:
    """Ids of the claims with a numeric check, in catalogue order."""
    registered = _registered()
    return tuple(i for i in _catalogue() if i in registered)


def evaluate(claim_id: str) -> ClaimCheck:
    """Run the check of ``claim_id``; claims without one get the catalogue's verdict."""
    entry = claim(claim_id)
    registered = _registered()
    if claim_id not in registered:
        return ClaimCheck(claim_id, None, None, "", entry["expected_verdict"], NOT_CHECKABLE)
    fn, unit = registered[claim_id]
    claimed, computed, findings = fn()
    findings = tuple(findings)
    detail = "; ".join(f"{f.said}: {f.found}" for f in findings)
    return ClaimCheck(claim_id, claimed, computed, unit, verdict_of(findings), detail, findings)


def evaluate_all() -> pd.DataFrame:
    """One row per claim: id, chapter, kind, claimed, computed, unit, verdict (computed),
    expected_verdict (catalogue), agree, checked (has a numeric check) and detail."""
    rows = []
    for entry in _catalogue().values():
        c = evaluate(entry["id"])
        rows.append({"id": c.id, "chapter": entry["chapter"], "kind": entry["kind"],
                     "claimed": c.claimed, "computed": c.computed, "unit": c.unit,
                     "verdict": c.verdict, "expected_verdict": entry["expected_verdict"],
                     "agree": c.verdict == entry["expected_verdict"],
                     "checked": entry["id"] in _registered(), "detail": c.detail})
    return pd.DataFrame(rows)


_SI_UNITS = ("FLOP/s", "B/s", "bit/s", "W")
_FRACTION_WORDS = ("share", "fraction", "saving", "MFU")
_MD_SPECIAL = set("\\`*_{}[]<>()#+-.!|~$:")


def format_value(value, unit: str, with_unit: bool = True) -> str:
    """A claimed or computed value for reading: SI prefix, percent for fractions, text as is.
    ``with_unit=False`` leaves out a unit that is not part of an SI quantity."""
    if value is None:
        return "n/a"
    if isinstance(value, str):
        return value
    head = unit.split(" ")[0].rstrip(",")
    if head in _SI_UNITS:
        return units.si(value, head) + unit[len(head):]
    text = (f"{100 * value:.3g}%" if any(w in unit for w in _FRACTION_WORDS)
            else f"{value:,.0f}" if abs(value) >= 1000 else f"{value:.4g}")
    return f"{text} ({unit})" if with_unit and unit else text


def _md(text: str) -> str:
    # Seed quotes hold code (#, *, _, backticks, $): escape so MyST shows them literally.
    return "".join("\\" + ch if ch in _MD_SPECIAL else ch for ch in str(text).replace("\n", " "))


_ROLE_WORDS = {("figure", True): "agrees", ("figure", False): "disagrees",
               ("framing", True): "holds", ("framing", False): "does not hold"}


def _label(f):
    return "context" if f.role == "context" else f"{f.role}, {_ROLE_WORDS[f.role, bool(f.agrees)]}"


def markdown(claim_id: str) -> str:
    """One claim as MyST markdown: quote, translation, claim, computed verdict with its
    findings, why and sources (for the appendix notebook)."""
    c, check = claim(claim_id), evaluate(claim_id)
    out = [f"`{claim_id}` ({c['kind']})", "", f"> {_md(c['quote_zh'])}", ">",
           f"> *{_md(c['quote_en'])}*", "", f"**Claim.** {_md(c['claim'])}", ""]
    head = f"**Verdict: {check.verdict}** (catalogue: {c['expected_verdict']})."
    if check.computed is None:
        out += [f"{head} {_md(NOT_CHECKABLE.capitalize())}.", ""]
    else:
        out += [f"{head} Claimed {_md(format_value(check.claimed, check.unit, False))}; "
                f"computed {_md(format_value(check.computed, check.unit))}.", ""]
        out += [f"- {_label(f)}: {_md(f.said)} → {_md(f.found)}" for f in check.findings] + [""]
    out += [f"**Why.** {_md(c['why'])}", ""]
    if c["sources"]:
        out += ["**Sources.**", ""]
        for src in c["sources"]:
            title, _, url = src.rpartition(" — ")
            out.append(f"- {_md(title)}: <{url.strip()}>")
    else:
        out.append("**Sources.** None needed: the check recomputes the seed's own numbers.")
    return "\n".join(out) + "\n"


def _near(a, b, tol=TOLERANCE):
    return bool(abs(a - b) <= tol * abs(b))


def _pf(x):
    return f"{units.to_pflops(x):.4g} PF"


def _pct(x):
    return f"{100 * x:.0f}%"


__all__ = ["Finding", "ClaimCheck", "verdict_of", "validate", "load", "claim", "checkable",
           "evaluate", "evaluate_all", "format_value", "markdown", "FIELDS", "CHAPTERS", "KINDS", "VERDICTS", "ROLES",
           "TOLERANCE", "NOT_CHECKABLE", "UNCHECKED_KINDS"]
