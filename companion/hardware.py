"""The machines at a glance: a cited registry of GPUs, links and systems.

The data live in ``data/hardware/`` (``gpus.csv``, ``links.csv``, ``systems.csv``), one row per
product, each with a ``source`` (document titles and URLs) and ``notes`` (where documents
disagree and which value the row takes). Conventions, fixed by the column names:

- FLOP/s are dense (no structured sparsity) unless the column says ``sparse``; a GPU's
  ``peak_flops(p)`` is dense and ``peak_flops(p, sparse=True)`` is the vendor's sparse figure.
- Bandwidths are bytes/s per direction (``_per_direction_Bps``); the vendor's bidirectional
  string is kept alongside (``scaleup_printed``, ``printed``).
- Bytes: "GB" is 10**9 bytes and "GiB" 2**30 everywhere in the companion. A vendor's memory
  "80 GB" is read as 80 GiB (HBM is built from binary-sized dies) into ``hbm_bytes``;
  ``hbm_printed`` keeps the vendor's text. What the driver lets a process see is less:
  ``hbm_visible_bytes`` (nvidia-smi's memory.total, 81,559 MiB on an H100 "80 GB"), and memory
  fit is checked against :attr:`GPU.usable_hbm_bytes` (the visible figure where published).
- ``data/hardware/gpu_details.csv`` adds per GPU: the driver-visible capacity, the last-level
  cache (NVIDIA's L2, AMD's Infinity Cache) and ``unverified``, the fields whose value comes
  only from secondary copies (B300's 160 SMs): :meth:`GPU.is_verified` says so.

Names are forgiving: case, spaces, dashes, underscores and brackets are ignored and each row
has aliases, so ``gpu("H100")``, ``gpu("h100-sxm")`` and ``gpu("H100 SXM5")`` are one product.
``"B200"`` is the HGX/DGX part (1000 W); ``"GB200"`` is the B200 as configured in GB200
(1200 W).
"""
from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from companion import schema
from companion.checks import choice, suggest

DATA_DIR = Path(__file__).resolve().parents[1] / "data" / "hardware"

#: Precisions a GPU row may carry, in ladder order. ``int8`` is in operations per second.
PRECISIONS = ("fp64", "fp64_tensor", "tf32", "bf16", "fp16", "fp8", "fp6", "fp4", "int8")

_PRECISION_ALIASES = {
    "float64": "fp64", "double": "fp64", "float32_tensor": "tf32", "tensorfloat32": "tf32",
    "bfloat16": "bf16", "float16": "fp16", "half": "fp16",
}


def _dense_column(precision):
    if precision == "fp64_tensor":
        return "fp64_tensor_dense_flops"
    return f"{precision}_dense_{'ops' if precision == 'int8' else 'flops'}"


def _sparse_column(precision):
    return f"{precision}_sparse_{'ops' if precision == 'int8' else 'flops'}"


def _norm(name):
    # Keep letters and digits only: "H100 SXM5", "h100-sxm5" and "h100_sxm5" collide on purpose.
    return re.sub(r"[^a-z0-9]", "", name.lower())


def _value(x):
    """A CSV cell as a Python value: blank (NaN) becomes None, whole floats stay floats."""
    if x is None or (not isinstance(x, str) and pd.isna(x)):
        return None
    if hasattr(x, "item"):
        x = x.item()
    return x


def _int_or_none(x):
    x = _value(x)
    return None if x is None else int(x)


def _float_or_none(x):
    x = _value(x)
    return None if x is None else float(x)


@functools.cache
def _table(kind):
    path = DATA_DIR / f"{kind}.csv"
    schema.check(path)  # a bad cell fails here, naming the file, row and column
    frame = pd.read_csv(path, dtype={"compute_capability": str, "key": str})
    if frame["key"].duplicated().any():
        raise ValueError(f"{path}: duplicate keys {sorted(frame['key'][frame['key'].duplicated()])}")
    return frame


@functools.cache
def _details():
    """``gpu_details.csv`` by GPU key (driver-visible HBM, last-level cache, unverified fields)."""
    schema.check(DATA_DIR / "gpu_details.csv")
    frame = pd.read_csv(DATA_DIR / "gpu_details.csv", dtype={"key": str})
    unknown = set(frame["key"]) - set(_table("gpus")["key"])
    if unknown or frame["key"].duplicated().any():
        raise ValueError(f"gpu_details.csv: keys {sorted(unknown)} not in gpus.csv, or duplicated")
    return {row["key"]: row for _, row in frame.iterrows()}


@functools.cache
def _index(kind):
    """Map each normalised key, name and alias to its row key; refuse ambiguous aliases."""
    index, labels = {}, []
    for row in _table(kind).itertuples(index=False):
        aliases = [] if pd.isna(row.aliases) else str(row.aliases).split(";")
        for label in (row.key, row.name, *aliases):
            label = label.strip()
            norm = _norm(label)
            if not norm:
                continue
            if index.get(norm, row.key) != row.key:
                raise ValueError(f"{kind}.csv: {label!r} names both {index[norm]!r} and {row.key!r}")
            index[norm] = row.key
            labels.append(label)
    return index, tuple(dict.fromkeys(labels))


def _resolve(kind, name):
    if not isinstance(name, str):
        raise TypeError(f"{kind[:-1]} name must be a string; got {type(name).__name__} {name!r}")
    index, labels = _index(kind)
    key = index.get(_norm(name))
    if key is None:
        names = list(_table(kind)["name"])
        close = suggest(name, labels)
        hint = f" Did you mean {' or '.join(repr(c) for c in close)}?" if close else ""
        raise ValueError(f"unknown {kind[:-1]} {name!r}; known: {', '.join(names)}.{hint}")
    frame = _table(kind)
    return frame.loc[frame["key"] == key].iloc[0]


def precision_name(precision):
    """The registry's name for ``precision`` ("bfloat16" -> "bf16"); raises on unknown ones."""
    if not isinstance(precision, str):
        raise TypeError(f"precision must be a string, one of {list(PRECISIONS)}; "
                        f"got {type(precision).__name__}")
    p = precision.strip().lower().replace("-", "_")
    return choice("precision", _PRECISION_ALIASES.get(p, p), PRECISIONS)


@dataclass(frozen=True)
class GPU:
    """One GPU product as configured (HGX B200 at 1000 W and GB200's B200 at 1200 W differ).

    FLOP/s come from ``peak_flops``; bandwidths are bytes/s; ``scaleup_Bps`` is the GPU's
    scale-up (NVLink / Infinity Fabric) bandwidth per direction, None where unverified.
    ``hbm_Bps`` and ``tdp_w`` are None where no document gives them (GH200's module power);
    methods that need them raise. The fields after ``sparse`` come from
    ``gpu_details.csv`` and default to unknown, so a spec built by hand needs none of them.
    """

    key: str
    name: str
    vendor: str
    arch: str
    form_factor: str
    year: int
    compute_capability: str
    hbm_bytes: float
    hbm_printed: str
    hbm_type: str
    hbm_Bps: float | None
    tdp_w: float | None
    scaleup_link: str
    scaleup_Bps: float | None
    scaleup_printed: str | None
    sm_count: int | None
    sm_kind: str
    boost_clock_hz: float | None
    source: str
    notes: str
    dense: tuple[tuple[str, float], ...]
    sparse: tuple[tuple[str, float], ...]
    hbm_visible_bytes: float | None = None  # nvidia-smi memory.total, where published
    llc_name: str | None = None  # last-level cache: "L2" (NVIDIA), "Infinity Cache (MALL)" (AMD)
    llc_bytes: float | None = None
    llc_Bps: float | None = None  # vendor peak, where published (NVIDIA publishes none)
    unverified: tuple[str, ...] = ()  # fields taken from secondary copies only
    details_source: str = ""

    @property
    def family(self) -> str:
        """Vendor and architecture with its generation number where the name has one, e.g.
        "NVIDIA Hopper" (H200 reuses H100's die; GB200 and B300 are Blackwell) or "AMD CDNA 3"
        (MI300X and MI325X; MI355X is CDNA 4, with other matrix rates and FP8 formats).
        Published measurements are shared within a family."""
        return f"{self.vendor} {re.match(r'[A-Za-z]+(?: [0-9]+)?', self.arch).group(0)}"

    @property
    def usable_hbm_bytes(self):
        """Capacity to fit a step against: the driver-visible total where published (81,559 MiB
        on an H100 "80 GB"), else ``hbm_bytes``. Allocator and CUDA context take more."""
        return self.hbm_visible_bytes if self.hbm_visible_bytes is not None else self.hbm_bytes

    @property
    def usable_hbm_basis(self) -> str:
        """Which figure :attr:`usable_hbm_bytes` is, in words."""
        return ("driver-visible HBM" if self.hbm_visible_bytes is not None else
                "raw HBM: no driver-visible figure is published")

    def _field(self, field):
        if not isinstance(field, str):
            raise TypeError(f"field must be a GPU attribute name (a string); got "
                            f"{type(field).__name__} {field!r}")
        choice("field", field, tuple(self.__dataclass_fields__))
        return field

    def is_verified(self, field):
        """False when ``field`` (a GPU attribute such as ``"tdp_w"``) was found only in
        secondary copies, not in a vendor document (``gpu_details.csv``, column unverified)."""
        return self._field(field) not in self.unverified

    def need(self, field):
        """The value of ``field``, or a ValueError saying that no document gives it."""
        value = getattr(self, self._field(field))
        if value is None:
            raise ValueError(f"{self.name} has no published {field} in the registry "
                             "(data/hardware/README.md: blank means not found, never zero)")
        return value

    def precisions(self):
        """Precisions with a published dense peak on this GPU, in ladder order."""
        return tuple(p for p, _ in self.dense)

    def sparse_precisions(self):
        """Precisions with a published structured-sparsity peak on this GPU."""
        return tuple(p for p, _ in self.sparse)

    def peak_flops(self, precision, sparse=False):
        """Peak FLOP/s (OP/s for ``int8``) at ``precision``; dense unless ``sparse=True``.

        Raises ValueError naming what the GPU has when it lacks the precision (V100 has no
        bf16, A100 no fp8) or lacks a sparse figure for it.
        """
        p = precision_name(precision)
        if not isinstance(sparse, bool):
            raise TypeError(f"sparse must be True or False; got {sparse!r}")
        dense = dict(self.dense)
        if p not in dense:
            have = ", ".join(self.precisions()) or "none (no document with its tensor peaks was found)"
            raise ValueError(f"{self.name} has no {p} peak; it has: {have}")
        if not sparse:
            return dense[p]
        table = dict(self.sparse)
        if p not in table:
            have = ", ".join(self.sparse_precisions()) or "none"
            raise ValueError(f"{self.name} has no published sparse {p} peak; "
                             f"sparse peaks exist for: {have}")
        return table[p]

    def sparsity_factor(self, precision):
        """Sparse peak over dense peak: 2 for 2:4 sparsity, 4/3 for GB300's FP4."""
        return self.peak_flops(precision, sparse=True) / self.peak_flops(precision)

    def ridge_point(self, precision, sparse=False):
        """FLOP per byte of HBM traffic where a kernel turns from memory- to compute-bound."""
        return self.peak_flops(precision, sparse) / self.need("hbm_Bps")

    def flops_per_watt(self, precision, sparse=False):
        """Peak FLOP/s per watt of TDP (FLOP per joule at the power limit)."""
        return self.peak_flops(precision, sparse) / self.need("tdp_w")

    @property
    def scaleup_bidirectional_Bps(self):
        """Scale-up bandwidth with both directions summed, as vendors print it."""
        return None if self.scaleup_Bps is None else 2 * self.scaleup_Bps


def _gpu_from_row(row):
    dense = tuple((p, float(row[_dense_column(p)])) for p in PRECISIONS
                  if _value(row[_dense_column(p)]) is not None)
    sparse = tuple((p, float(row[_sparse_column(p)])) for p in PRECISIONS
                   if _sparse_column(p) in row.index and _value(row[_sparse_column(p)]) is not None)
    clock = _value(row["boost_clock_hz"])
    scaleup = _value(row["scaleup_per_direction_Bps"])
    d = _details().get(row["key"])
    extra = {} if d is None else dict(
        hbm_visible_bytes=_float_or_none(d["hbm_visible_bytes"]), llc_name=_value(d["llc_name"]),
        llc_bytes=_float_or_none(d["llc_bytes"]), llc_Bps=_float_or_none(d["llc_Bps"]),
        unverified=tuple(u for u in str(_value(d["unverified"]) or "").split(";") if u),
        details_source=d["source"])
    return GPU(
        key=row["key"], name=row["name"], vendor=row["vendor"], arch=row["arch"],
        form_factor=row["form_factor"], year=int(row["year"]),
        compute_capability=str(row["compute_capability"]),
        hbm_bytes=float(row["hbm_bytes"]), hbm_printed=row["hbm_printed"],
        hbm_type=row["hbm_type"], hbm_Bps=_float_or_none(row["hbm_Bps"]),
        tdp_w=_float_or_none(row["tdp_w"]),
        scaleup_link=row["scaleup_link"],
        scaleup_Bps=None if scaleup is None else float(scaleup),
        scaleup_printed=_value(row["scaleup_printed"]),
        sm_count=_int_or_none(row["sm_count"]), sm_kind=row["sm_kind"],
        boost_clock_hz=None if clock is None else float(clock),
        source=row["source"], notes=row["notes"], dense=dense, sparse=sparse, **extra)


@functools.cache
def _gpu_by_key(key):
    frame = _table("gpus")
    return _gpu_from_row(frame.loc[frame["key"] == key].iloc[0])



def compute_major(spec) -> int:
    """The major CUDA compute capability of a GPU spec (or anything with a
    ``compute_capability``): 9 Hopper, 10 Blackwell; 0 for a part without one (AMD's gfx
    targets)."""
    major = str(getattr(spec, "compute_capability", "")).split(".")[0]
    return int(major) if major.isdigit() else 0


def runs_mx(spec) -> bool:
    """Whether a GPU's matrix units read MX block scales (MXFP8, MXFP4). NVIDIA: compute
    capability 10.0 or higher (Transformer Engine's check_mxfp8_support: "Device compute
    capability 10.0 or higher required for MXFP8 execution"). AMD: gfx950 (CDNA 4), whose
    scaled MFMA instructions take E8M0 block exponents ("Scaled MFMA (gfx950 only)",
    ROCm/aiter op_tests/opus/device/test_mfma_scale.h)."""
    cc = str(getattr(spec, "compute_capability", "") or "")
    return cc == "gfx950" if cc.startswith("gfx") else compute_major(spec) >= 10


def gpu(name):
    """The GPU called ``name`` (forgiving: ``"H100"``, ``"h100-sxm"``, ``"GB200"``, ``"MI300X"``).

    A GPU passes through unchanged, so functions can accept either a name or a spec.
    """
    if isinstance(name, GPU):
        return name
    return _gpu_by_key(_resolve("gpus", name)["key"])


def gpus():
    """The GPU table as a DataFrame, one row per product, SI units (see the column names)."""
    return _table("gpus").copy()


def gpu_details():
    """``gpu_details.csv`` as a DataFrame: driver-visible HBM, last-level cache, unverified."""
    return pd.DataFrame(list(_details().values())).reset_index(drop=True)


@dataclass(frozen=True)
class Link:
    """An interconnect: NVLink generation, switch, die-to-die link, PCIe, network port or NIC.

    ``per_direction_Bps`` is the nominal data rate one way, in bytes/s (None where the vendor
    does not say which convention its figure uses, as for NV-HBI). ``printed`` and
    ``printed_Bps`` keep the vendor's figure and ``printed_convention`` says how to read it.
    ``achievable_per_direction_Bps`` is a published measurement, where one was found.
    """

    key: str
    name: str
    category: str
    scope: str
    per_direction_Bps: float | None
    printed: str
    printed_Bps: float
    printed_convention: str
    signaling: str | None
    achievable_per_direction_Bps: float | None
    year: int | None
    source: str
    notes: str

    @property
    def bidirectional_Bps(self):
        """Both directions summed (the marketing convention), None if unknown."""
        return None if self.per_direction_Bps is None else 2 * self.per_direction_Bps


def link(name):
    """The interconnect called ``name`` (``"NVLink 4"``, ``"NDR"``, ``"PCIe Gen5"``, ``"NV-HBI"``)."""
    row = _resolve("links", name)
    fields = {f: _value(row[f]) for f in Link.__dataclass_fields__}
    for f in ("per_direction_Bps", "printed_Bps", "achievable_per_direction_Bps"):
        fields[f] = None if fields[f] is None else float(fields[f])
    fields["year"] = _int_or_none(row["year"])
    return Link(**fields)


def links():
    """The interconnect table as a DataFrame (bytes/s per direction, see ``Link``)."""
    return _table("links").copy()


@dataclass(frozen=True)
class System:
    """A node or rack: GPUs, CPUs, NICs, scale-up domain and maximum power (watts)."""

    key: str
    name: str
    gpu_key: str
    gpu_count: int
    cpu: str
    cpu_count: int
    cpu_cores_total: int | None
    scaleup_domain_gpus: int
    scaleup_switch: str
    nic: str
    nic_count: int
    nic_per_direction_Bps: float
    hbm_total_printed: str
    max_power_w: float | None
    cooling: str
    year: int
    source: str
    notes: str

    def gpu(self):
        """The spec of this system's GPU."""
        return gpu(self.gpu_key)

    @property
    def hbm_bytes(self):
        """Total HBM in bytes (GPU count times the GPU's ``hbm_bytes``)."""
        return self.gpu_count * self.gpu().hbm_bytes

    def peak_flops(self, precision, sparse=False):
        """Peak FLOP/s of all the system's GPUs together."""
        return self.gpu_count * self.gpu().peak_flops(precision, sparse)

    @property
    def scaleout_Bps(self):
        """Scale-out (NIC) bandwidth of the whole system, bytes/s per direction."""
        return self.nic_count * self.nic_per_direction_Bps


def system(name):
    """The node or rack called ``name`` (``"DGX H100"``, ``"DGX B200"``, ``"GB200 NVL72"``)."""
    row = _resolve("systems", name)
    fields = {f: _value(row[f]) for f in System.__dataclass_fields__ if f != "gpu_key"}
    for f in ("gpu_count", "cpu_count", "cpu_cores_total", "scaleup_domain_gpus", "nic_count",
              "year"):
        fields[f] = _int_or_none(row[f])
    for f in ("nic_per_direction_Bps", "max_power_w"):
        fields[f] = None if fields[f] is None else float(fields[f])
    return System(gpu_key=row["gpu"], **fields)


def systems():
    """The systems table as a DataFrame."""
    return _table("systems").copy()
