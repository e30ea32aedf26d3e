"""Shared argument checks and measurement records."""
import json

import numpy as np
import pytest

from companion import checks
from companion.bench import record


def test_choice_suggests_close_matches():
    with pytest.raises(ValueError, match=r"Did you mean 'all_reduce'"):
        checks.choice("op", "allreduce", ["all_reduce", "all_gather"])
    with pytest.raises(TypeError, match="op must be a string"):
        checks.choice("op", 3, ["all_reduce"])


@pytest.mark.parametrize("kw, value, err", [
    (dict(positive=True), 0, ValueError), (dict(integer=True), 1.5, TypeError),
    ({}, float("nan"), ValueError), ({}, True, TypeError), (dict(minimum=2), 1, ValueError)])
def test_number(kw, value, err):
    with pytest.raises(err, match="size"):
        checks.number("size", value, **kw)


def test_divides_and_floating():
    with pytest.raises(ValueError, match="tp=3 must divide heads=32"):
        checks.divides("tp", 3, "heads", 32)
    with pytest.raises(TypeError, match="floating"):
        checks.floating_array("x", np.arange(3))


def test_record_is_written_once_with_provenance(tmp_path):
    meta = record.provenance("cpu")
    for key in ("date_utc", "command", "python", "numpy", "torch", "device"):
        assert key in meta
    p = record.write_record("unit-test", [{"v": 1}], meta, tmp_path)
    body = json.loads(p.read_text())
    assert body["results"] == [{"v": 1}] and body["kind"] == "unit-test"
    p2 = record.write_record("unit-test", [{"v": 2}], meta, tmp_path)
    assert p2 != p and json.loads(p.read_text())["results"] == [{"v": 1}]
    assert [r["results"][0]["v"] for r in record.load_records("unit-test", tmp_path)] == [1, 2]
    assert not list(tmp_path.glob(".tmp-*"))
