"""Declared schemas of the data files: columns, types, allowed values, units.

Every CSV under ``data/`` that the companion reads has a :class:`Schema` here. :func:`check`
reads a file with the standard ``csv`` module (cells exactly as written) and raises a
:class:`SchemaError` naming the file, the row (its number and key) and the column for the first
cell that breaks its column's rule: a missing required column, a blank where a value is needed,
a number that does not parse or is out of range, a boolean that is not exactly ``True`` or
``False`` (one ``no`` in ``sequence_parallel`` would otherwise turn the column into strings,
every one of them truthy), a name outside a closed set, a duplicate key.

Permissive where the data grows: columns the schema does not know are allowed (helpers add
them), and an unknown column whose name ends in a unit suffix (``_bytes``, ``_Bps``, ``_flops``,
``_ops``, ``_w``, ``_s``, ``_hz``) is checked as a non-negative number, blank allowed, as the
naming convention promises. The loaders (``companion.hardware``, ``companion.parallel``,
``companion.stack``) call :func:`check` before they parse a file.
"""
from __future__ import annotations

import csv
import functools
import math
import re
from dataclasses import dataclass
from pathlib import Path

from companion import checks
# the layout vocabulary is the model's own: a recompute mode or precision added there is legal
# in published_runs.csv without a second edit here
from companion.model import ATTENTION_KERNELS, PRECISIONS, RECOMPUTE

DATA_DIR = Path(__file__).resolve().parents[1] / "data"

KINDS = ("text", "int", "float", "bool", "choice", "version", "compute_capability")
#: Unit of each suffix of the naming convention (SI inside; see the package's style rules).
UNIT_SUFFIXES = {"_bytes": "bytes", "_Bps": "bytes/s", "_flops": "FLOP/s", "_ops": "op/s",
                 "_w": "W", "_s": "s", "_hz": "Hz"}


class SchemaError(ValueError):
    """A data file breaks its declared schema; the message names file, row and column."""


@dataclass(frozen=True)
class Column:
    """One column: ``kind`` (one of :data:`KINDS`), whether it must be present (``required``)
    and may be blank (``blank``), its ``allowed`` values (``choice``), ``minimum`` (numbers)
    and ``unit`` (documentation, and the suffix rule's check)."""

    name: str
    kind: str = "text"
    required: bool = True
    blank: bool = False
    allowed: tuple[str, ...] = ()
    minimum: float | None = None
    unit: str = ""

    def __post_init__(self):
        checks.choice("kind", self.kind, KINDS)
        if self.kind == "choice" and not self.allowed:
            raise ValueError(f"column {self.name}: a choice needs its allowed values")


@dataclass(frozen=True)
class Schema:
    """The columns of one file, its ``key`` column or columns (unique together) and what a
    row describes."""

    file: str  # path under data/
    key: str | tuple[str, ...]
    columns: tuple[Column, ...]
    describes: str = ""

    def column(self, name: str) -> Column | None:
        return next((c for c in self.columns if c.name == name), None)


def _num(name, unit="", blank=True, minimum=0.0, kind="float", required=True):
    return Column(name, kind, required=required, blank=blank, minimum=minimum, unit=unit)


def _text(name, blank=False, required=True):
    return Column(name, "text", required=required, blank=blank)


def _bool(name, required=True):
    return Column(name, "bool", required=required)


_PRECISIONS = ("fp32", "tf32", "bf16", "fp16", "fp8", "fp6", "fp4", "int8")
_FLOP_COLUMNS = tuple(
    _num(f"{p}_{sparsity}_{'ops' if p == 'int8' else 'flops'}",
         "op/s" if p == "int8" else "FLOP/s", required=False)
    for p in ("fp64", "fp64_tensor", "tf32", "bf16", "fp16", "fp8", "fp6", "fp4", "int8")
    for sparsity in ("dense", "sparse"))

SCHEMAS: dict[str, Schema] = {s.file.rsplit("/", 1)[-1]: s for s in (
    Schema("hardware/gpus.csv", "key", (
        _text("key"), _text("name"), _text("aliases", blank=True), _text("vendor"),
        _text("arch", blank=True, required=False), _text("form_factor", blank=True, required=False),
        _num("year", kind="int", blank=True, minimum=1990),
        Column("compute_capability", "compute_capability", blank=True),
        *_FLOP_COLUMNS,
        _num("hbm_bytes", "bytes", kind="int", minimum=1),
        _text("hbm_printed", blank=True, required=False), _text("hbm_type", blank=True, required=False),
        _num("hbm_Bps", "bytes/s", minimum=1),
        _text("hbm_bw_printed", blank=True, required=False),
        _num("tdp_w", "W", kind="int", minimum=1),
        _text("scaleup_link", blank=True, required=False),
        _num("scaleup_per_direction_Bps", "bytes/s (per direction)"),
        _text("scaleup_printed", blank=True, required=False),
        _num("sm_count", kind="int", minimum=1),
        Column("sm_kind", "choice", blank=True, required=False, allowed=("SM", "CU")),
        _num("boost_clock_hz", "Hz", kind="int", minimum=1, required=False),
        _text("source"), _text("notes", blank=True, required=False)),
        "one GPU model: peaks (dense and sparse per precision), memory, power, scale-up link"),
    Schema("hardware/links.csv", "key", (
        _text("key"), _text("name"), _text("aliases", blank=True), _text("category"),
        _text("scope", blank=True, required=False),
        _num("per_direction_Bps", "bytes/s (per direction)"),
        _text("printed", blank=True, required=False),
        _num("printed_Bps", "bytes/s (as printed)"),
        Column("printed_convention", "choice",
               allowed=("bidirectional", "per direction", "unspecified")),
        _text("signaling", blank=True, required=False),
        _num("achievable_per_direction_Bps", "bytes/s (per direction)", required=False),
        _num("year", kind="int", minimum=1990, required=False),
        _text("source"), _text("notes", blank=True, required=False)),
        "one interconnect: NVLink generation, switch, NIC, PCIe, die-to-die link"),
    Schema("hardware/systems.csv", "key", (
        _text("key"), _text("name"), _text("aliases", blank=True), _text("gpu"),
        _num("gpu_count", kind="int", blank=False, minimum=1),
        _text("cpu", blank=True, required=False),
        _num("cpu_count", kind="int", required=False), _num("cpu_cores_total", kind="int",
                                                            required=False),
        _num("scaleup_domain_gpus", kind="int", blank=False, minimum=1),
        _text("scaleup_switch", blank=True, required=False), _text("nic", blank=True),
        _num("nic_count", kind="int", minimum=0),
        _num("nic_per_direction_Bps", "bytes/s (per direction, per NIC)"),
        _text("hbm_total_printed", blank=True, required=False),
        _num("max_power_w", "W", kind="int", required=False),
        _text("cooling", blank=True, required=False),
        _num("year", kind="int", minimum=1990, required=False),
        _text("source"), _text("notes", blank=True, required=False)),
        "one node or rack: GPUs, CPUs, NICs, power"),
    Schema("hardware/gpu_details.csv", "key", (
        _text("key"), _num("hbm_visible_bytes", "bytes (as the driver reports)", kind="int",
                           minimum=1),
        _text("hbm_visible_printed", blank=True, required=False),
        _text("llc_name", blank=True, required=False),
        _num("llc_bytes", "bytes", kind="int", minimum=1), _text("llc_printed", blank=True,
                                                                 required=False),
        _num("llc_Bps", "bytes/s"), _text("llc_bw_printed", blank=True, required=False),
        _text("unverified", blank=True, required=False), _text("source"),
        _text("notes", blank=True, required=False)),
        "per GPU: driver-visible HBM, last-level cache, fields not yet verified"),
    Schema("validation_bands.csv", ("gpu", "precision", "family"), (
        _text("gpu"), _text("generation"), _text("precision"),
        Column("family", "choice", allowed=("dense", "MoE")),
        _num("low", "ratio measured / predicted", blank=False, minimum=0),
        _num("high", "ratio measured / predicted", blank=False, minimum=0), _text("basis")),
        "the step-time uncertainty band of one GPU, precision and family (dense/MoE)"),
    Schema("published_runs.csv", "run_id", (
        _text("run_id"), _text("source"), _text("table", blank=True), _text("model"),
        _text("gpu"), _text("system", blank=True), _text("software"),
        *(_num(c, kind="int", blank=False, minimum=1) for c in (
            "num_gpus", "tp", "pp", "dp", "cp", "ep", "vpp", "microbatch", "global_batch")),
        _bool("sequence_parallel"),
        Column("recompute", "choice", allowed=RECOMPUTE),
        Column("precision", "choice", allowed=PRECISIONS),
        _num("measured_step_time_s", "s (per step)"),
        _num("measured_tflops_per_gpu", "TFLOP/s per GPU (the source's convention)"),
        _text("flop_convention"), _text("notes", blank=True), _bool("held_out"),
        _num("measured_tokens_per_s_per_gpu", "tokens/s per GPU"),
        Column("zero_stage", "int", minimum=0, allowed=("0", "1", "2", "3")),
        _bool("distributed_optimizer"),
        # columns other helpers are adding (optional; blank = the stack's default)
        Column("grad_reduce_bytes", "int", unit="bytes per gradient element", required=False,
               blank=True, allowed=("2", "4")),
        Column("cuda_graphs", "bool", required=False, blank=True),
        _num("expert_tp", kind="int", minimum=1, required=False),
        Column("dispatch_precision", "choice", required=False, blank=True,
               allowed=PRECISIONS),
        Column("ep_overlap", "bool", required=False, blank=True),
        Column("dispatcher", "choice", required=False, blank=True,
               allowed=("alltoall", "deepep")),
        _num("domain_gpus", "GPUs per scale-up domain the job uses", kind="int", minimum=1,
             required=False),
        Column("attention_kernel", "choice", required=False, blank=True,
               allowed=ATTENTION_KERNELS),
        _num("offload_layers", "layers whose activations the recipe keeps in host memory",
             kind="int", minimum=0, required=False),
        _num("source_gflops_per_token", "GFLOP per token (the source's own counter)",
             required=False),
        _num("ddp_bucket_params", "parameters per data-parallel gradient bucket", kind="int",
             minimum=1, required=False)),
        "one published training run: layout and measured speed"),
    Schema("published_measurements.csv", "id", (
        _text("id"), _text("kind"),
        _text("what"), _text("hardware"), _num("value", "the row's unit", blank=False),
        _text("unit"), _num("peak", "the row's unit"), _num("fraction_of_peak"),
        _text("conditions", blank=True), Column("label", "choice", allowed=("published",)),
        _text("source")),
        "one published kernel or collective measurement"),
    Schema("software/containers.csv", "container", (
        _text("container"), _text("aliases", blank=True), Column("cuda", "version"),
        _text("pytorch", blank=True), _text("megatron_core", blank=True),
        _text("transformer_engine", blank=True),
        Column("min_compute_capability", "compute_capability", blank=True),
        Column("max_compute_capability", "compute_capability", blank=True),
        _text("source"), _text("notes", blank=True, required=False)),
        "one NGC/NeMo container: its CUDA and library versions"),
    Schema("software/cuda_drivers.csv", "cuda", (
        Column("cuda", "version"), _text("label", blank=True),
        Column("linux_x86_64_min_driver", "version"), _text("source")),
        "one CUDA toolkit release and the Linux driver it needs"),
    Schema("software/cuda_minor_compat.csv", "cuda_major", (
        _num("cuda_major", kind="int", blank=False, minimum=1),
        _num("min_driver_branch", kind="int", blank=False, minimum=1),
        _num("max_driver_branch_exclusive", kind="int", minimum=1), _text("source")),
        "minor-version compatibility of one CUDA major version"),
    Schema("software/env_vars.csv", "name", (
        _text("name"), _text("library"), _text("category", blank=True),
        Column("kind", "choice", allowed=("int", "choice", "list", "string")),
        _text("choices", blank=True), _num("minimum", kind="int", minimum=None),
        _num("maximum", kind="int", minimum=None), _text("default", blank=True),
        _text("legacy_ints", blank=True), _text("meaning", blank=True), _text("source")),
        "one NCCL/CUDA environment variable and its legal values"),
    Schema("software/gpu_arch.csv", "compute_capability", (
        Column("compute_capability", "compute_capability"), _text("sm"),
        _text("architecture"), _text("example_gpus", blank=True),
        Column("min_cuda", "version"), _num("last_cuda_major", kind="int", minimum=1),
        _text("source"), _text("notes", blank=True, required=False)),
        "one compute capability: its architecture and CUDA range"),
    Schema("software/gpu_drivers.csv", "gpu", (
        _text("gpu"), Column("min_driver", "version"),
        Column("open_kernel_modules_required", "choice", allowed=("yes", "no")),
        _text("source"), _text("notes", blank=True, required=False)),
        "one GPU's minimum driver"),
)}

_INT = re.compile(r"[+-]?\d+")
_VERSION = re.compile(r"\d+(\.\d+)*")
_CC = re.compile(r"\d+\.\d+|gfx[0-9a-f]+")


def _rule(column: Column) -> str:
    if column.kind == "bool":
        return "True or False"
    if column.kind in ("choice",) or column.allowed:
        return "one of " + ", ".join(column.allowed)
    if column.kind == "version":
        return "a dotted version such as 12.8.0"
    if column.kind == "compute_capability":
        return "a compute capability such as 9.0 (or an AMD gfx target)"
    bound = "" if column.minimum is None else f" >= {column.minimum:g}"
    unit = f" ({column.unit})" if column.unit else ""
    return {"int": "an integer", "float": "a finite number"}.get(column.kind, "text") \
        + bound + unit


def _cell_ok(column: Column, cell: str) -> bool:
    """Whether ``cell`` (non-blank, as written) follows ``column``'s rule."""
    kind = column.kind
    if kind == "bool":
        return cell in ("True", "False")
    if kind == "choice" or (column.allowed and kind == "int"):
        return cell in column.allowed
    if kind == "version":
        return bool(_VERSION.fullmatch(cell))
    if kind == "compute_capability":
        return bool(_CC.fullmatch(cell))
    if kind in ("int", "float"):
        if kind == "int" and not _INT.fullmatch(cell):
            return False
        try:
            value = float(cell)
        except ValueError:
            return False
        return math.isfinite(value) and (column.minimum is None or value >= column.minimum)
    return True


def _inferred(name: str) -> Column | None:
    """The rule for a column the schema does not declare: by its unit suffix, if it has one."""
    for suffix, unit in UNIT_SUFFIXES.items():
        if name.endswith(suffix):
            return _num(name, unit, required=False)
    return None


def schema_for(path: Path | str) -> Schema:
    """The schema of a data file, chosen by its file name (``gpus.csv``, ...)."""
    name = Path(path).name
    return SCHEMAS[checks.choice("data file", name, SCHEMAS)]


def check(path: Path | str, schema: Schema | None = None) -> int:
    """Check one CSV against its schema; return the number of rows. Raises
    :class:`SchemaError` naming the file, the row and the column of the first bad cell."""
    path = Path(path)
    schema = schema_for(path) if schema is None else schema
    stat = path.stat()
    return _check(str(path), stat.st_mtime_ns, stat.st_size, schema)


@functools.lru_cache(maxsize=64)
def _check(path: str, _mtime_ns: int, _size: int, schema: Schema) -> int:
    # Cached on the file's mtime and size: loaders call check() on every read, edits re-check.
    label = _label(path)
    with open(path, newline="", encoding="utf-8") as f:
        reader = csv.reader(f)
        try:
            header = next(reader)
        except StopIteration:
            raise SchemaError(f"{label}: the file is empty (no header row)") from None
        missing = [c.name for c in schema.columns if c.required and c.name not in header]
        if missing:
            raise SchemaError(f"{label}: missing column(s) {', '.join(missing)} (columns: "
                              f"{', '.join(header)})")
        dupes = sorted({h for h in header if header.count(h) > 1})
        if dupes:
            raise SchemaError(f"{label}: column(s) {', '.join(dupes)} appear twice in the header")
        rules = [schema.column(h) or _inferred(h) for h in header]
        key_columns = (schema.key,) if isinstance(schema.key, str) else schema.key
        keys: dict[str, int] = {}
        n = 0
        for n, row in enumerate(reader, start=1):
            line = reader.line_num
            if not any(cell.strip() for cell in row):
                continue  # a blank line
            where = f"{label}, row {n} (line {line})"
            if len(row) > len(header):
                raise SchemaError(f"{where}: {len(row)} cells for {len(header)} columns (an "
                                  f"unquoted comma?)")
            row = row + [""] * (len(header) - len(row))  # short rows: trailing cells blank
            key = "/".join(row[header.index(k)] for k in key_columns)
            if key.strip("/"):
                where += f", {'/'.join(key_columns)} {key!r}"
            for cell, name, rule in zip(row, header, rules):
                if rule is None:
                    continue
                if cell.strip() != cell and rule.kind != "text":
                    raise SchemaError(f"{where}, column {name!r}: {cell!r} has spaces around it")
                if cell == "":
                    if not rule.blank:
                        raise SchemaError(f"{where}, column {name!r}: blank, but a value is "
                                          f"required ({_rule(rule)})")
                    continue
                if not _cell_ok(rule, cell):
                    raise SchemaError(f"{where}, column {name!r}: {cell!r} is not "
                                      f"{_rule(rule)}")
            if key in keys:
                raise SchemaError(f"{where}: duplicate {'/'.join(key_columns)} (also row "
                                  f"{keys[key]})")
            keys[key] = n
    return n


def _label(path: str) -> str:
    p = Path(path)
    return str(p.relative_to(DATA_DIR.parent)) if p.is_relative_to(DATA_DIR.parent) else str(p)


def check_all(directory: Path | str | None = None) -> dict[str, int]:
    """Check every CSV under ``directory`` (default ``data/``) against its schema; rows per
    file. A CSV with no declared schema is an error (declare it here), so no data file goes
    unchecked; a declared file that is absent is skipped."""
    base = Path(directory) if directory is not None else DATA_DIR
    declared = {s.file: s for s in SCHEMAS.values()}
    found = sorted(str(p.relative_to(base)) for p in base.rglob("*.csv"))
    undeclared = [f for f in found if f not in declared]
    if undeclared:
        raise SchemaError(f"no schema declared for {', '.join(undeclared)}: add one to "
                          f"companion/schema.py (SCHEMAS)")
    return {f: check(base / f, declared[f]) for f in found}


def describe(name: str) -> list[dict]:
    """The declared columns of one data file (``"gpus.csv"``, ...) as rows: name, kind,
    required, blank allowed, rule (allowed values, bound, unit)."""
    s = schema_for(name)
    return [{"column": c.name, "kind": c.kind, "required": c.required, "blank": c.blank,
             "rule": _rule(c)} for c in s.columns]


__all__ = ["Column", "Schema", "SchemaError", "SCHEMAS", "KINDS", "UNIT_SUFFIXES", "check",
           "check_all", "schema_for", "describe", "DATA_DIR"]
