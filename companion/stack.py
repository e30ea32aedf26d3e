"""Software-stack compatibility and environment checks, driven by cited tables.

The tables live in ``data/software/`` and every row carries its source:

- ``cuda_drivers.csv``: CUDA toolkit release to the Linux driver it ships with (NVIDIA CUDA
  Toolkit Release Notes, Table 3), and ``cuda_minor_compat.csv``: the driver range for CUDA
  minor-version compatibility.
- ``gpu_arch.csv``: compute capability to the first CUDA toolkit that builds native code for it.
- ``gpu_drivers.csv``: the earliest driver NVIDIA lists for a GPU product.
- ``containers.csv``: framework containers and the CUDA they ship.
- ``env_vars.csv``: NCCL (and a few CUDA and PyTorch) environment variables with their
  documented values, and whether the NCCL documentation files them under "System
  configuration" or "Debugging".

Every check returns a list of :class:`Finding` (severity, message, source), worst first, so a
notebook can print them and a test can assert on them.
"""
from __future__ import annotations

import functools
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Mapping

import pandas as pd

from companion import checks, hardware, schema

DATA_DIR = Path(__file__).resolve().parents[1] / "data" / "software"

#: Finding severities, worst first.
SEVERITIES = ("error", "warning", "info")

#: Characters that look like an ASCII hyphen-minus in a terminal but are not one.
DASH_LOOKALIKES = {"\u2010": "HYPHEN", "\u2011": "NON-BREAKING HYPHEN", "\u2012": "FIGURE DASH",
                   "\u2013": "EN DASH", "\u2014": "EM DASH", "\u2015": "HORIZONTAL BAR",
                   "\u2212": "MINUS SIGN", "\ufe63": "SMALL HYPHEN-MINUS",
                   "\uff0d": "FULLWIDTH HYPHEN-MINUS"}

#: Megatron-LM's option (megatron/training/arguments.py, ``_add_distributed_args``:
#: ``--tensor-model-parallel-size``, ``type=int``, ``default=1``).
MEGATRON_TP_FLAG = "--tensor-model-parallel-size"
MEGATRON_TP_DEFAULT = 1
MEGATRON_ARGS_SOURCE = ("NVIDIA/Megatron-LM, megatron/training/arguments.py, _add_distributed_args "
                        "('--tensor-model-parallel-size', type=int, default=1) "
                        "https://github.com/NVIDIA/Megatron-LM/blob/main/megatron/training/arguments.py")

#: Seconds per InfiniBand local ACK timeout unit: 4.096 us x 2**value (NCCL env docs).
IB_TIMEOUT_UNIT_S = 4.096e-6
#: Width of the InfiniBand QP retry counter (Linux mlx5_ifc.h: ``u8 retry_count[0x3]``).
IB_RETRY_BITS = 3


@dataclass(frozen=True)
class Finding:
    """One result of a check: ``severity`` is ``error``, ``warning`` or ``info``."""
    severity: str
    message: str
    source: str
    subject: str = ""

    def __str__(self) -> str:
        return f"[{self.severity}] {self.subject + ': ' if self.subject else ''}{self.message}"


def _sorted(findings: Iterable[Finding]) -> list[Finding]:
    return sorted(findings, key=lambda f: SEVERITIES.index(f.severity))


def findings_table(findings: Iterable[Finding]) -> pd.DataFrame:
    """Findings as a DataFrame (severity, subject, message, source) for display."""
    return pd.DataFrame([{"severity": f.severity, "subject": f.subject, "message": f.message,
                          "source": f.source} for f in findings],
                        columns=["severity", "subject", "message", "source"])


# -- tables ------------------------------------------------------------------------------------
@functools.cache
def table(name: str) -> pd.DataFrame:
    """One of the cited tables in ``data/software`` (all columns as strings, blanks as '')."""
    checks.choice("table", name, ["cuda_drivers", "cuda_minor_compat", "gpu_arch", "gpu_drivers",
                                  "containers", "env_vars"])
    schema.check(DATA_DIR / f"{name}.csv")
    return pd.read_csv(DATA_DIR / f"{name}.csv", dtype=str, keep_default_na=False)


def parse_version(param: str, text) -> tuple[int, ...]:
    """``"535.129.03"`` -> ``(535, 129, 3)``; anything but dotted digits is a ValueError."""
    if isinstance(text, (int, float)) and not isinstance(text, bool):
        text = str(text)
    if not isinstance(text, str):
        raise TypeError(f"{param} must be a version string like '12.8' or '570.133.20'; "
                        f"got {type(text).__name__}")
    if not re.fullmatch(r"\d+(\.\d+)*", text.strip()):
        raise ValueError(f"{param} must be dotted digits like '12.8' or '570.133.20'; got {text!r}")
    return tuple(int(p) for p in text.strip().split("."))


def _fmt(version: tuple[int, ...]) -> str:
    return ".".join(str(v) for v in version)


def toolkit(cuda: str) -> pd.Series:
    """The release-notes row of a CUDA toolkit; ``"12.5"`` means its GA release (12.5.0)."""
    v = parse_version("cuda", cuda)
    if len(v) == 2:
        v = v + (0,)
    rows = table("cuda_drivers")
    hit = rows[rows["cuda"].map(lambda c: parse_version("cuda", c)) == v]
    if hit.empty:
        known = sorted({".".join(c.split(".")[:2]) for c in rows["cuda"]},
                       key=lambda s: parse_version("cuda", s))
        raise ValueError(f"unknown CUDA release {cuda!r}; the table knows {', '.join(known)} "
                         f"(with updates as x.y.1, x.y.2; there was no CUDA 12.7)")
    return hit.iloc[0]


def min_driver_for_cuda(cuda: str) -> str:
    """Linux x86_64 driver shipped with a CUDA toolkit (release notes, Table 3)."""
    return toolkit(cuda)["linux_x86_64_min_driver"]


def _gpu(gpu):
    g = hardware.gpu(gpu)
    if g.vendor != "NVIDIA":
        raise ValueError(f"{g.name} is a {g.vendor} GPU; CUDA and driver checks apply to NVIDIA "
                         f"GPUs only")
    return g


def arch(gpu) -> pd.Series:
    """The ``gpu_arch`` row of a registry GPU (by its compute capability)."""
    g = _gpu(gpu)
    rows = table("gpu_arch")
    hit = rows[rows["compute_capability"] == g.compute_capability]
    if hit.empty:
        raise ValueError(f"no architecture row for compute capability {g.compute_capability}")
    return hit.iloc[0]


def min_cuda_for_gpu(gpu) -> str:
    """First CUDA toolkit that builds native code (SASS) for ``gpu``."""
    return arch(gpu)["min_cuda"]


def _driver_row(gpu):
    key = _gpu(gpu).key
    for _, row in table("gpu_drivers").iterrows():
        if hardware.gpu(row["gpu"]).key == key:
            return row
    return None


def find_container(name: str) -> pd.Series:
    """A framework container row by name or alias (``"nemo:24.05"``)."""
    rows = table("containers")
    labels = {}
    for _, row in rows.iterrows():
        for label in [row["container"], *filter(None, row["aliases"].split(";"))]:
            labels[label.strip().lower()] = row
    if not isinstance(name, str):
        raise TypeError(f"container must be a string; got {type(name).__name__}")
    if name.strip().lower() not in labels:
        checks.choice("container", name, list(rows["container"]))
    return labels[name.strip().lower()]


# -- the stack check ---------------------------------------------------------------------------
def check_stack(gpu=None, cuda=None, driver=None, container=None,
                kernel_modules=None) -> list[Finding]:
    """Check a GPU / CUDA toolkit / driver / container combination against the cited tables.

    ``cuda`` is the toolkit the code was built with (``"12.5"``); with ``container`` the
    container's own CUDA is used unless ``cuda`` is given too. ``driver`` is the Linux driver
    (``"535.129.03"``); ``kernel_modules`` is ``"open"`` or ``"proprietary"``. Returns findings,
    worst first; an empty stack is a ValueError.
    """
    if all(x is None for x in (gpu, cuda, driver, container)):
        raise ValueError("check_stack needs at least one of gpu, cuda, driver, container")
    if kernel_modules is not None:
        checks.choice("kernel_modules", kernel_modules, ["open", "proprietary"])
    if driver is not None:
        parse_version("driver", driver)
    out: list[Finding] = []
    box = find_container(container) if container is not None else None
    if box is not None:
        if cuda is not None and parse_version("cuda", cuda)[:2] != parse_version(
                "cuda", box["cuda"])[:2]:
            # a row whose notes call its CUDA an upper bound says so in the finding too
            older = " or older" if "upper bound" in str(box.get("notes", "")) else ""
            out.append(Finding("warning", (
                f"{box['container']} ships CUDA {box['cuda']}{older}, not {cuda}: inside a "
                f"container its own toolkit runs, and the host contributes only the driver"),
                box["source"], "container"))
        cuda = box["cuda"] if cuda is None else cuda
    tk = toolkit(cuda) if cuda is not None else None
    g = _gpu(gpu) if gpu is not None else None

    if g is not None:
        a = arch(g.name)
        need = parse_version("min_cuda", a["min_cuda"])
        if tk is not None and parse_version("cuda", tk["cuda"]) < need:
            out.append(Finding("error", (
                f"{g.name} is compute capability {a['compute_capability']} ({a['sm']}); CUDA "
                f"{a['min_cuda']} is the first toolkit that builds native code for it. A "
                f"{tk['label']} build has no {a['sm']} kernels in cuBLAS, cuDNN or NCCL and runs "
                f"only where every kernel ships PTX for the driver to JIT"), a["source"], "cuda"))
        if tk is not None and a["last_cuda_major"] and (
                parse_version("cuda", tk["cuda"])[0] > int(a["last_cuda_major"])):
            out.append(Finding("error", (
                f"CUDA {tk['cuda']} no longer builds for {a['sm']}; the last toolkit family that "
                f"does is {a['last_cuda_major']}.x"), a["source"], "cuda"))
        if box is not None and box["max_compute_capability"] and (
                parse_version("cc", a["compute_capability"])
                > parse_version("cc", box["max_compute_capability"])):
            out.append(Finding("error", (
                f"{box['container']} targets GPUs up to compute capability "
                f"{box['max_compute_capability']}; {g.name} is {a['compute_capability']}"),
                box["source"], "container"))
        row = _driver_row(g.name)
        if row is not None and driver is not None and (
                parse_version("driver", driver) < parse_version("min_driver", row["min_driver"])):
            branch, first = parse_version("driver", driver)[0], parse_version(
                "min_driver", row["min_driver"])[0]
            mig = (f"{row['min_driver']}, the minimum driver NVIDIA's MIG user guide lists for "
                   f"this GPU (a MIG minimum; the only per-GPU driver table found)")
            if branch < first:
                out.append(Finding("error", (
                    f"driver {driver} (R{branch}) is older than R{first}, the branch of {mig}: "
                    f"R{branch} predates {g.name}, which is not usable at all"),
                    row["source"], "driver"))
            else:
                out.append(Finding("warning", (
                    f"driver {driver} is below {mig}: MIG needs at least that release"),
                    row["source"], "driver"))
        if row is not None and row["open_kernel_modules_required"] == "yes" and (
                kernel_modules == "proprietary"):
            out.append(Finding("error", f"{g.name} requires the open GPU kernel modules",
                               row["source"], "kernel_modules"))

    toolkit_findings = _driver_vs_toolkit(driver, tk)
    ok = (_datacenter_compatible(driver, box["datacenter_drivers"])
          if box is not None and driver is not None else None)
    if ok is not None:
        # The container's own notes list this branch: forward compatibility on data-center GPUs
        # replaces the minor-version-compatibility warning of the toolkit table.
        toolkit_findings = [f for f in toolkit_findings if f.severity != "warning"]
        out.append(Finding("info", (
            f"driver {driver} is in a data-center driver branch that {box['container']}'s "
            f"release notes list as compatible (R{ok[0]} >= {_fmt(ok)}, forward-compatibility "
            f"mode): a documented combination on data-center GPUs such as H100"),
            box["source"], "driver"))
    out += toolkit_findings
    if not out:
        out.append(Finding("info", "no incompatibility found in the tables", str(DATA_DIR)))
    return _sorted(out)


def _datacenter_compatible(driver: str, branches: str):
    """The listed minimum ``(branch, ...)`` that ``driver`` satisfies, or None."""
    if not branches:
        return None
    have = parse_version("driver", driver)
    for item in branches.split("|"):
        lo = parse_version("datacenter_drivers", item)
        if have[0] == lo[0] and have >= lo:
            return lo
    return None


def _driver_vs_toolkit(driver, tk) -> list[Finding]:
    """The driver against the toolkit's own driver and its minor-version compatibility range."""
    out: list[Finding] = []
    if driver is not None and tk is not None:
        have, need = parse_version("driver", driver), parse_version(
            "min_driver", tk["linux_x86_64_min_driver"])
        src = tk["source"]
        if have >= need:
            out.append(Finding("info", f"driver {driver} is at least the {tk['label']} driver "
                               f"{tk['linux_x86_64_min_driver']}", src, "driver"))
        else:
            major = parse_version("cuda", tk["cuda"])[0]
            compat = table("cuda_minor_compat")
            row = compat[compat["cuda_major"] == str(major)]
            lo = int(row.iloc[0]["min_driver_branch"]) if len(row) else None
            if lo is not None and have[0] >= lo:
                out.append(Finding("warning", (
                    f"driver {driver} is older than the {tk['label']} driver "
                    f"{tk['linux_x86_64_min_driver']}; it runs CUDA {major}.x code only through "
                    f"minor-version compatibility (limited features: no JIT of newer PTX) or, on "
                    f"data-center GPUs, the forward-compatibility package"),
                    row.iloc[0]["source"], "driver"))
            else:
                out.append(Finding("error", (
                    f"driver {driver} cannot run CUDA {major}.x: it needs at least branch {lo} "
                    f"(minor-version compatibility) and {tk['linux_x86_64_min_driver']} for "
                    f"{tk['label']}"), src, "driver"))
    return out


# -- environment variables ---------------------------------------------------------------------
def ib_timeout_s(value: int) -> float:
    """Seconds per attempt for ``NCCL_IB_TIMEOUT=value``: 4.096 us x 2**value (1 to 31)."""
    checks.number("NCCL_IB_TIMEOUT", value, integer=True, minimum=1, maximum=31)
    return IB_TIMEOUT_UNIT_S * 2 ** value


def ib_failure_detection_s(timeout: int = 20, retry_cnt: int = 7) -> float:
    """Seconds before a dead InfiniBand link errors out: the first transmission and
    ``retry_cnt`` retransmissions, each given up after a local ACK timeout of
    4.096 us x 2**timeout (the queue pair errors when the last retry times out). NCCL's
    defaults (20 and 7) give 34 s; a retry count above 7 does not exist (3-bit field,
    :func:`ib_retry_effective`)."""
    r = checks.number("NCCL_IB_RETRY_CNT", retry_cnt, integer=True, minimum=0,
                      maximum=2 ** IB_RETRY_BITS - 1)
    return ib_timeout_s(timeout) * (r + 1)


def ib_retry_effective(value: int) -> int:
    """What a 3-bit InfiniBand retry-count field keeps of ``value`` if the driver masks it
    instead of rejecting it (``value & 7``); see the ``NCCL_IB_RETRY_CNT`` row's sources."""
    checks.number("NCCL_IB_RETRY_CNT", value, integer=True, nonnegative=True)
    return value & (2 ** IB_RETRY_BITS - 1)


def parse_exports(text: str) -> dict[str, str]:
    """``export NAME=value`` (or ``NAME=value``) lines of a shell snippet as a dict.

    Comments and other lines are skipped; a repeated name keeps its last value, as the shell does.
    """
    if not isinstance(text, str):
        raise TypeError(f"text must be a string; got {type(text).__name__}")
    env = {}
    for line in text.splitlines():
        m = re.match(r"\s*(?:export\s+)?([A-Za-z_][A-Za-z0-9_]*)=(\S*)", line.split("#")[0])
        if m:
            env[m.group(1)] = m.group(2).strip("'\"")
    return env


def _check_value(row, value: str) -> list[Finding]:
    name, src, kind = row["name"], row["source"], row["kind"]
    if kind == "int":
        try:
            v = int(value)
        except ValueError:
            return [Finding("error", f"{value!r} is not an integer", src, name)]
        lo = int(row["minimum"]) if row["minimum"] else None
        hi = int(row["maximum"]) if row["maximum"] else None
        if (lo is not None and v < lo) or (hi is not None and v > hi):
            extra = (f"; a 3-bit field keeps only {v} & 7 = {ib_retry_effective(v)}, fewer "
                     f"retries than the default" if name == "NCCL_IB_RETRY_CNT" and v > 7 else "")
            return [Finding("error", f"{v} is outside the documented range "
                            f"{lo if lo is not None else '-inf'}..{hi if hi is not None else 'inf'}"
                            f"{extra}", src, name)]
        if name == "NCCL_IB_TIMEOUT":
            return [Finding("info", f"each retry waits 4.096 us x 2^{v} = {ib_timeout_s(v):.3g} s "
                            f"(NCCL default {row['default'].split()[0]})", src, name)]
        return []
    if kind in ("choice", "list"):
        allowed = row["choices"].split("|")
        legacy = dict(p.split("=")[::-1] for p in row["legacy_ints"].split("|")) \
            if row["legacy_ints"] else {}
        if legacy and value.isdigit():
            meaning = legacy.get(value, "SYS" if int(value) > 4 else None)
            return [Finding("warning", f"integer {value} is the legacy form of {meaning}; the docs "
                            f"discourage integers because their meaning changed between "
                            f"releases", src, name)]
        items = value.lstrip("^").split(",") if kind == "list" else [value]
        out = []
        for item in items:
            if ":" in item:  # NCCL >= 2.24 per-function form "allreduce:tree"
                item = item.split(":", 1)[1].lstrip("^")
            low = {a.lower(): a for a in allowed}
            if item.lower() not in low:
                close = checks.suggest(item, allowed)
                hint = f" Did you mean {' or '.join(close)}?" if close else ""
                out.append(Finding("error", f"{item!r} is not one of {', '.join(allowed)}.{hint}",
                                   src, name))
        return out
    if name == "NCCL_IB_HCA" and value and not value.lstrip("^").startswith("="):
        return [Finding("warning", (
            "without a leading '=' each entry is a prefix (the docs' example: mlx5_1 also "
            f"selects mlx5_10 to mlx5_19); write '={value.lstrip('^')}' for exact names"),
            src, name)]
    if name == "NCCL_IB_GID_INDEX":
        return [Finding("info", "used in RoCE mode only; native InfiniBand ignores it", src, name)]
    if name == "NCCL_DEBUG" and value in ("INFO", "TRACE"):
        return [Finding("info", f"{value} logs on every rank; the docs describe NCCL_DEBUG as "
                        "commonly used for debugging (WARN is enough in production)", src, name)]
    return []


def env_check(env: Mapping[str, str]) -> list[Finding]:
    """Check environment variables against ``env_vars.csv``: values, ranges, debug-only use.

    Unknown ``NCCL_*`` names (NCCL ignores them silently) are flagged with close matches. Other
    unknown names are ignored.
    """
    if not isinstance(env, Mapping):
        raise TypeError(f"env must be a mapping of names to values; got {type(env).__name__}")
    rows = table("env_vars").set_index("name", drop=False)
    out: list[Finding] = []
    for name, value in env.items():
        if not isinstance(name, str) or not isinstance(value, str):
            raise TypeError(f"env names and values must be strings; got {name!r}={value!r}")
        if name not in rows.index:
            if name.startswith("NCCL_"):
                close = checks.suggest(name, rows.index[rows["library"] == "NCCL"])
                hint = f" Did you mean {' or '.join(close)}?" if close else ""
                out.append(Finding("warning", f"not an NCCL variable this table knows; NCCL "
                                   f"ignores unknown names silently.{hint}",
                                   rows.iloc[0]["source"], name))
            continue
        row = rows.loc[name]
        out += _check_value(row, value)
        if row["category"] == "debugging" and value != row["default"].split(" ")[0]:
            what = ("the NCCL docs list it under 'Debugging': such variables 'should not be used "
                    "in production nor retained in scripts'" if row["library"] == "NCCL" else
                    row["meaning"])
            out.append(Finding("warning", f"set to {value}; {what}", row["source"], name))
        elif row["category"] == "debugging":
            out.append(Finding("info", f"{value} is the default: setting it changes nothing",
                               row["source"], name))
    return _sorted(out)


def nccl_env_check(env: Mapping[str, str]) -> list[Finding]:
    """:func:`env_check` restricted to the ``NCCL_*`` variables of ``env``."""
    if not isinstance(env, Mapping):
        raise TypeError(f"env must be a mapping of names to values; got {type(env).__name__}")
    return env_check({k: v for k, v in env.items() if str(k).startswith("NCCL_")})


# -- command lines -----------------------------------------------------------------------------
def command_line_check(args: Iterable[str] | str) -> list[Finding]:
    """Flag dash look-alikes (en dash, em dash, minus sign ...) where an option needs ``--``."""
    if isinstance(args, str):
        args = args.split()
    out = []
    for arg in args:
        if not isinstance(arg, str):
            raise TypeError(f"arguments must be strings; got {arg!r}")
        bad = [c for c in arg[:2] if c in DASH_LOOKALIKES]
        if bad:
            fixed = "--" + arg.lstrip("".join(DASH_LOOKALIKES) + "-")
            names = ", ".join(f"U+{ord(c):04X} {DASH_LOOKALIKES[c]}" for c in bad)
            out.append(Finding("error", f"starts with {names}, not ASCII '-': argparse treats it "
                               f"as a positional value, not an option. Write {fixed!r}",
                               "Python documentation, argparse (options are recognized by the "
                               "'-' prefix character) https://docs.python.org/3/library/argparse.html",
                               arg))
    return out


_PARSER_SCRIPT = f"""
import argparse, sys
p = argparse.ArgumentParser(prog="pretrain_gpt.py", allow_abbrev=False)
p.add_argument("{MEGATRON_TP_FLAG}", type=int, default={MEGATRON_TP_DEFAULT})
a = p.parse_args(sys.argv[1:])
print("tensor_model_parallel_size =", a.tensor_model_parallel_size)
"""


def run_tp_flag(args: list[str]) -> subprocess.CompletedProcess:
    """Parse ``args`` with a real argparse parser carrying Megatron's TP option, in a fresh
    Python process, and return the completed process (exit code, stdout, stderr)."""
    if isinstance(args, str) or not all(isinstance(a, str) for a in args):
        raise TypeError("args must be a list of strings, as sys.argv[1:] would be")
    return subprocess.run([sys.executable, "-c", _PARSER_SCRIPT, *args], capture_output=True,
                          text=True, timeout=60, check=False)


__all__ = ["Finding", "SEVERITIES", "check_stack", "env_check", "nccl_env_check", "parse_exports",
           "ib_timeout_s", "ib_failure_detection_s", "ib_retry_effective", "command_line_check", "run_tp_flag", "toolkit", "min_driver_for_cuda",
           "arch", "min_cuda_for_gpu", "find_container", "table", "parse_version", "findings_table"]
