"""The seeds' claims (``data/claims.yaml``), each checked with the companion's own numbers.

A check registered for a claim id (in ``companion.claims_checks``) recomputes what the
claim is about (a registry figure, a roofline, an alpha-beta collective, an energy product)
and compares it with what the seed says. Each comparison is a :class:`Finding` with a role:

- ``figure``: a number or fact the seed states (agrees within ``TOLERANCE``, or within the
  finding's own ``tolerance`` where it names one, or not);
- ``framing``: whether the conclusion the seed draws survives a like-for-like comparison
  (same precision, same convention, the seed's own inputs);
- ``context``: shown for the reader, never counted.

:func:`verdict_of` turns findings into a verdict: ``wrong`` if no stated figure agrees,
``partly-correct`` if some do and some do not, ``misleading`` if the figures hold (or there
are none) but a framing fails, ``correct`` otherwise. Claims with no number to
recompute (code, software, recipes, and hardware or measurement claims no published figure
settles) get no check: their verdict is the catalogue's, with ``computed=None``.
"""
from __future__ import annotations

import functools
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from companion import checks, units
from companion.claims_core import (  # noqa: F401  (re-exported: the seeds' constants and Finding)
    B100_FP8_DENSE_FLOPS_THIRD_PARTY, CHECKS, DAY_S, DGX_B200_RACK_UNITS, HOUR_S, ROLES,
    SEED_13B_B200_DAYS, SEED_13B_B200_GPU_HOURS, SEED_13B_H100_DAYS, SEED_13B_H100_GPU_HOURS,
    SEED_13B_SAVING,
    SEED_175B_SAVING, SEED_GPU_KW, SEED_NODE_KW,
    SEED_YUAN_PER_KWH, SHOEYBI_GPUS_PER_SERVER, SHOEYBI_INTER_SERVER_Bps,
    SHOEYBI_INTRA_SERVER_Bps, TOKEN_ID_BYTES, TOLERANCE, Finding)

CLAIMS_PATH = Path(__file__).resolve().parents[1] / "data" / "claims.yaml"

FIELDS = ("id", "seed", "chapter", "quote_zh", "quote_en", "claim", "kind", "check",
          "expected_verdict", "why", "sources")
CHAPTERS = ("hardware", "low_precision", "memory", "interconnect", "parallelism", "power",
            "pitfalls")
KINDS = ("spec", "arithmetic", "code", "software", "measurement", "opinion")
VERDICTS = ("correct", "wrong", "misleading", "unverifiable", "partly-correct")
#: Kinds whose verdict comes from the catalogue (there is no number to recompute).
UNCHECKED_KINDS = ("code", "software", "opinion")
NOT_CHECKABLE = "not numerically checkable: see why"

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
    """Check one catalogue entry (keys, enums, types); return it, or raise TypeError (not a
    mapping) or ValueError."""
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


def _registered() -> dict:
    # claims_checks registers every check in companion.claims_core when it is imported; it is
    # imported on first use so that reading the catalogue does not load the models.
    from companion import claims_checks  # noqa: F401

    return CHECKS


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
    if f.role == "context":
        return "context"
    tol = "" if f.tolerance is None else f" within {f.tolerance:.0%}"
    return f"{f.role}, {_ROLE_WORDS[f.role, bool(f.agrees)]}{tol}"


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


__all__ = ["Finding", "ClaimCheck", "verdict_of", "validate", "load", "claim", "checkable",
           "evaluate", "evaluate_all", "format_value", "markdown", "FIELDS", "CHAPTERS", "KINDS", "VERDICTS", "ROLES",
           "TOLERANCE", "NOT_CHECKABLE", "UNCHECKED_KINDS"]
