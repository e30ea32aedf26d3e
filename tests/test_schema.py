"""Data-file schemas: every CSV checks clean, and a bad cell is named by file, row and column."""
import csv
import shutil

import pytest

from companion import hardware, parallel, schema
from companion.schema import SchemaError


def _edit(src, dst, row, column, value):
    """Copy ``src`` to ``dst`` with one cell changed (``row`` counts data rows from 1)."""
    with open(src, newline="") as f:
        rows = list(csv.reader(f))
    rows[row][rows[0].index(column)] = value
    with open(dst, "w", newline="") as f:
        csv.writer(f).writerows(rows)
    return dst


def test_every_data_file_follows_its_schema():
    counts = schema.check_all()
    assert set(counts) <= {s.file for s in schema.SCHEMAS.values()}
    assert {"hardware/gpus.csv", "published_runs.csv"} <= set(counts)
    assert all(n > 0 for n in counts.values())


def test_an_undeclared_data_file_fails(tmp_path):
    shutil.copytree(schema.DATA_DIR / "software", tmp_path / "software")
    (tmp_path / "software" / "new_table.csv").write_text("a,b\n1,2\n")
    with pytest.raises(SchemaError, match="no schema declared for software/new_table.csv"):
        schema.check_all(tmp_path)


def test_one_no_in_sequence_parallel_is_named(tmp_path, monkeypatch):
    bad = _edit(schema.DATA_DIR / "published_runs.csv", tmp_path / "published_runs.csv", 3,
                "sequence_parallel", "no")
    with pytest.raises(SchemaError, match=r"published_runs.csv, row 3 \(line \d+\), run_id "
                                          r"'\w+', column 'sequence_parallel': 'no' is not "
                                          r"True or False"):
        schema.check(bad)
    import sys  # the loader refuses it too, wherever published_runs lives
    monkeypatch.setattr(sys.modules[parallel.published_runs.__module__], "PUBLISHED_RUNS", bad)
    with pytest.raises(SchemaError, match="sequence_parallel"):
        parallel.published_runs()


@pytest.mark.parametrize("file, column, value, message", [
    ("published_runs.csv", "tp", "8.5", "is not an integer"),
    ("published_runs.csv", "num_gpus", "", "blank, but a value is required"),
    ("published_runs.csv", "held_out", "false", "is not True or False"),
    ("published_runs.csv", "recompute", "partial", "one of none, selective, full"),
    ("published_runs.csv", "measured_step_time_s", "-3", ">= 0"),
    ("published_runs.csv", "measured_tflops_per_gpu", "nan", "a finite number"),
    ("hardware/gpus.csv", "bf16_dense_flops", "989 TFLOPS", "a finite number >= 0 (FLOP/s)"),
    ("hardware/gpus.csv", "hbm_bytes", "80e9", "an integer"),
    ("hardware/links.csv", "printed_convention", "both ways", "bidirectional, per direction"),
    ("software/gpu_drivers.csv", "min_driver", "latest", "a dotted version"),
    ("software/gpu_drivers.csv", "open_kernel_modules_required", "True", "one of yes, no"),
])
def test_a_bad_cell_names_file_row_and_column(tmp_path, file, column, value, message):
    name = file.rsplit("/", 1)[-1]
    bad = _edit(schema.DATA_DIR / file, tmp_path / name, 2, column, value)
    with pytest.raises(SchemaError) as err:
        schema.check(bad)
    text = str(err.value)
    assert name in text and "row 2" in text and f"column {column!r}" in text and message in text


def test_missing_column_duplicate_key_and_extra_cells(tmp_path):
    src = schema.DATA_DIR / "hardware" / "systems.csv"
    with open(src, newline="") as f:
        rows = list(csv.reader(f))
    i = rows[0].index("gpu_count")
    cut = tmp_path / "systems.csv"
    with open(cut, "w", newline="") as f:
        csv.writer(f).writerows([r[:i] + r[i + 1:] for r in rows])
    with pytest.raises(SchemaError, match="systems.csv: missing column.*gpu_count"):
        schema.check(cut)
    with open(cut, "w", newline="") as f:
        csv.writer(f).writerows(rows + [rows[1]])
    with pytest.raises(SchemaError, match=f"duplicate key.*also row 1"):
        schema.check(cut)
    with open(cut, "w", newline="") as f:
        csv.writer(f).writerows(rows[:2] + [rows[2] + ["stray"]])
    with pytest.raises(SchemaError, match="row 2.*cells for"):
        schema.check(cut)


def test_new_columns_and_rows_that_follow_the_conventions_pass(tmp_path):
    src = schema.DATA_DIR / "published_runs.csv"
    with open(src, newline="") as f:
        rows = list(csv.reader(f))
    rows[0] += ["future_flag", "dispatch_bytes"]  # helpers add columns: allowed
    rows[1] += ["1", "4096"]
    new = list(rows[1])
    new[0] = "a_new_run"
    rows.append(new)
    out = tmp_path / "published_runs.csv"
    with open(out, "w", newline="") as f:
        csv.writer(f).writerows(rows)
    assert schema.check(out) == len(rows) - 1
    # ...but a column named for a unit holds numbers of that unit
    rows[2] += ["1", "lots"]
    with open(out, "w", newline="") as f:
        csv.writer(f).writerows(rows)
    with pytest.raises(SchemaError, match="column 'dispatch_bytes': 'lots' is not a finite "
                                          "number >= 0 \\(bytes\\)"):
        schema.check(out)


def test_the_hardware_registry_checks_before_parsing(tmp_path, monkeypatch):
    for sub in ("hardware",):
        shutil.copytree(schema.DATA_DIR / sub, tmp_path / sub)
    _edit(schema.DATA_DIR / "hardware" / "gpus.csv", tmp_path / "hardware" / "gpus.csv", 1,
          "tdp_w", "700W")
    monkeypatch.setattr(hardware, "DATA_DIR", tmp_path / "hardware")
    hardware._table.cache_clear()
    hardware._index.cache_clear()
    try:
        with pytest.raises(SchemaError, match="gpus.csv, row 1.*column 'tdp_w': '700W'"):
            hardware.gpu("H100")
    finally:
        monkeypatch.undo()
        hardware._table.cache_clear()
        hardware._index.cache_clear()
    assert hardware.gpu("H100").tdp_w == 700


def test_describe_lists_units():
    rows = {r["column"]: r for r in schema.describe("gpus.csv")}
    assert "FLOP/s" in rows["bf16_dense_flops"]["rule"] and rows["key"]["required"]
    with pytest.raises(ValueError, match="Did you mean 'gpus.csv'"):
        schema.describe("gpu.csv")


def test_gradient_width_is_one_a_stack_accepts(tmp_path):
    # machine.Stack takes 2 (16-bit) or 4 (FP32) bytes per gradient element; a CSV with 3
    # passed the schema and failed later, in the stack, under another name
    src = schema.DATA_DIR / "published_runs.csv"
    with open(src, newline="") as f:
        rows = list(csv.reader(f))
    col = rows[0].index("grad_reduce_bytes")
    rows[1][col] = "3"
    out = tmp_path / "published_runs.csv"
    with open(out, "w", newline="") as f:
        csv.writer(f).writerows(rows)
    with pytest.raises(SchemaError, match="grad_reduce_bytes"):
        schema.check(out)
