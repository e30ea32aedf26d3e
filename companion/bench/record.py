"""Measurement records: JSON with full provenance, written atomically, never overwritten.

A record is what one bench run measured plus where it ran: device, driver, library versions,
date, git commit and the command. Records live in ``data/measurements/``; a new run adds a new
file. Writing goes through a temporary file and ``os.link`` so an interrupted run never leaves a
half-written record and an existing record is never replaced.
"""
from __future__ import annotations

import datetime as _dt
import json
import os
import platform
import re
import subprocess
import sys
import tempfile
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


def provenance(device: str = "cpu") -> dict:
    """Where and with what a measurement ran. ``device`` is ``"cpu"`` or ``"cuda"``."""
    import numpy
    info = {
        "date_utc": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "command": " ".join([Path(sys.argv[0]).name, *sys.argv[1:]]) if sys.argv else "",
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


def write_record(kind: str, results: list[dict], meta: dict, directory: Path | str | None = None,
                 ) -> Path:
    """Save one run as ``<kind>-<device>-<UTC time>.json``; refuse to overwrite.

    ``meta`` is :func:`provenance` plus the bench's own settings. Returns the path written.
    """
    directory = Path(directory) if directory is not None else MEASUREMENTS_DIR
    directory.mkdir(parents=True, exist_ok=True)
    stamp = _dt.datetime.now(_dt.timezone.utc).strftime("%Y%m%dT%H%M%S%fZ")
    path = directory / f"{_slug(kind)}-{_slug(str(meta.get('device', 'device')))}-{stamp}.json"
    body = json.dumps({"kind": kind, "meta": meta, "results": results}, indent=1, sort_keys=True)
    fd, tmp = tempfile.mkstemp(dir=directory, prefix=".tmp-", suffix=".json")
    try:
        with os.fdopen(fd, "w") as f:
            f.write(body + "\n")
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, 0o644)  # mkstemp makes 0600; a record is meant to be read by anyone
        os.link(tmp, path)  # fails if the name exists: records are never replaced
    finally:
        os.unlink(tmp)
    return path


def load_records(kind: str | None = None, directory: Path | str | None = None) -> list[dict]:
    """Every record (optionally of one ``kind``), oldest first, each with its ``path``."""
    directory = Path(directory) if directory is not None else MEASUREMENTS_DIR
    records = []
    for p in sorted(directory.glob("*.json")):
        rec = json.loads(p.read_text())
        if kind is None or rec.get("kind") == kind:
            rec["path"] = str(p.relative_to(ROOT)) if p.is_relative_to(ROOT) else str(p)
            records.append(rec)
    return records
