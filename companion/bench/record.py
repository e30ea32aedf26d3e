"""Measurement records: JSON with full provenance, written atomically, never overwritten.

A record is what one bench run measured plus where it ran: device, driver, library versions,
date, git commit and the command. Records live in ``data/measurements/``; a new run adds a new
file. Writing goes through a temporary file and ``os.link`` so an interrupted run never leaves a
half-written record and an existing record is never replaced; two runs that pick the same name
(the same microsecond) both survive, the second under a ``-1`` suffix. Records are standard JSON:
NaN and infinities are written as ``null``.

Reading is robust to what crashes leave behind: temporary files (``.tmp-*``, or any name
starting with a dot) are skipped, a file that is not a valid record is named in a warning and
skipped while the others load, and records come oldest first by the time written inside them.
"""
from __future__ import annotations

import datetime as _dt
import json
import math
import os
import platform
import re
import subprocess
import sys
import tempfile
import warnings
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
MEASUREMENTS_DIR = ROOT / "data" / "measurements"


def _git_commit() -> str | None:
    try:
        out = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True,
                             text=True, timeout=10)
        return out.stdout.strip() or None
    except (OSError, subprocess.SubprocessError):
        return None


def _cpu_name() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _program() -> str:
    """How this process was started, as a command one can type again: ``python -m pkg`` for a
    package's ``__main__.py``, else the script's name."""
    spec = getattr(sys.modules.get("__main__"), "__spec__", None)
    if spec is not None and spec.name:  # started with -m: the module's dotted name
        name = spec.name.removesuffix(".__main__")
        return f"python -m {name}"
    return Path(sys.argv[0]).name


def provenance(device: str = "cpu") -> dict:
    """Where and with what a measurement ran. ``device`` is ``"cpu"`` or ``"cuda"``."""
    import numpy
    info = {
        "date_utc": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "command": " ".join([_program(), *sys.argv[1:]]) if sys.argv else "",
        "git_commit": _git_commit(),
        "python": platform.python_version(),
        "platform": platform.platform(),
        "numpy": numpy.__version__,
        "cpu": _cpu_name(),
        "cpu_count": os.cpu_count(),
    }
    try:
        import torch
        info["torch"] = torch.__version__
        info["torch_threads"] = torch.get_num_threads()
        if device == "cuda" and torch.cuda.is_available():
            props = torch.cuda.get_device_properties(0)
            info.update({
                "device": torch.cuda.get_device_name(0),
                "device_sm_count": props.multi_processor_count,
                "device_memory_bytes": props.total_memory,
                "compute_capability": f"{props.major}.{props.minor}",
                "cuda_runtime": torch.version.cuda,
                "cudnn": torch.backends.cudnn.version(),
                "nccl": ".".join(map(str, torch.cuda.nccl.version())),
            })
            try:
                out = subprocess.run(
                    ["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                    capture_output=True, text=True, timeout=20)
                info["driver"] = out.stdout.strip().splitlines()[0]
            except (OSError, subprocess.SubprocessError, IndexError):
                info["driver"] = None
        else:
            info["device"] = info["cpu"]
    except ImportError:
        info["device"] = info["cpu"]
    return info


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")[:40] or "device"


def _standard(value):
    """``value`` with NaN and infinities as None and numpy scalars as Python ones, so that
    ``json.dumps(..., allow_nan=False)`` accepts it (NaN is not JSON: RFC 8259, Section 6)."""
    if isinstance(value, dict):
        return {str(k): _standard(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_standard(v) for v in value]
    if hasattr(value, "item") and getattr(value, "ndim", None) == 0:
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def write_record(kind: str, results: list[dict], meta: dict, directory: Path | str | None = None,
                 ) -> Path:
    """Save one run as ``<kind>-<device>-<UTC time>.json``; refuse to overwrite.

    ``meta`` is :func:`provenance` plus the bench's own settings. Returns the path written.
    The record's ``written_utc`` (microseconds) orders :func:`load_records`.
    """
    if not isinstance(kind, str) or not kind.strip():
        raise TypeError(f"kind must be a non-empty string; got {kind!r}")
    if not isinstance(results, list):
        raise TypeError(f"results must be a list of dicts; got {type(results).__name__}")
    if not isinstance(meta, dict):
        raise TypeError(f"meta must be a dict (provenance() plus settings); got "
                        f"{type(meta).__name__}")
    directory = Path(directory) if directory is not None else MEASUREMENTS_DIR
    directory.mkdir(parents=True, exist_ok=True)
    now = _dt.datetime.now(_dt.timezone.utc)
    stem = (f"{_slug(kind)}-{_slug(str(meta.get('device', 'device')))}-"
            f"{now.strftime('%Y%m%dT%H%M%S%fZ')}")
    body = json.dumps(_standard({"kind": kind, "written_utc": now.isoformat(), "meta": meta,
                                 "results": results}), indent=1, sort_keys=True, allow_nan=False)
    fd, tmp = tempfile.mkstemp(dir=directory, prefix=".tmp-", suffix=".json")
    try:
        with os.fdopen(fd, "w") as f:
            f.write(body + "\n")
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, 0o644)  # mkstemp makes 0600; a record is meant to be read by anyone
        for n in range(1000):
            path = directory / (f"{stem}.json" if n == 0 else f"{stem}-{n}.json")
            try:
                os.link(tmp, path)  # fails if the name exists: records are never replaced
                break
            except FileExistsError:
                continue
        else:
            raise FileExistsError(f"1000 records named {stem}*.json already exist in {directory}")
    finally:
        os.unlink(tmp)
    return path


def _written(rec: dict) -> _dt.datetime | None:
    """The time a record was written: ``written_utc``, else its provenance's ``date_utc``."""
    for text in (rec.get("written_utc"), (rec.get("meta") or {}).get("date_utc")):
        try:
            t = _dt.datetime.fromisoformat(str(text))
        except ValueError:
            continue
        return t if t.tzinfo else t.replace(tzinfo=_dt.timezone.utc)
    return None


_NEVER = _dt.datetime.min.replace(tzinfo=_dt.timezone.utc)


def load_records(kind: str | None = None, directory: Path | str | None = None) -> list[dict]:
    """Every record (optionally of one ``kind``), oldest first by the time written inside it,
    each with its ``path``. Temporary and hidden files are skipped; a file that is not a
    record (torn, not JSON, not an object with a ``kind``) is skipped with a warning naming it.
    """
    if kind is not None and not isinstance(kind, str):
        raise TypeError(f"kind must be a string or None; got {type(kind).__name__}")
    directory = Path(directory) if directory is not None else MEASUREMENTS_DIR
    records = []
    for p in sorted(directory.glob("*.json")):
        if p.name.startswith("."):  # a writer's temporary file, complete or not
            continue
        try:
            rec = json.loads(p.read_text())
            if not isinstance(rec, dict) or not isinstance(rec.get("kind"), str):
                raise ValueError("not a JSON object with a 'kind'")
        except (OSError, UnicodeDecodeError, ValueError) as exc:
            warnings.warn(f"skipping {p}: not a readable record ({exc})", stacklevel=2)
            continue
        if kind is None or rec.get("kind") == kind:
            rec["path"] = str(p.relative_to(ROOT)) if p.is_relative_to(ROOT) else str(p)
            records.append(rec)
    records.sort(key=lambda r: (_written(r) or _NEVER, r["path"]))
    return records
