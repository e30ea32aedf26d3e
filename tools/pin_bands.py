"""Rewrite data/validation_bands.csv from the cross-validation (companion.validation.band_table).

Run after any change to the step-time model or to data/published_runs.csv, then re-pin
tests/test_validation.py:  PYTHONPATH=. python tools/pin_bands.py
"""
from companion import validation

if __name__ == "__main__":
    table = validation.band_table()
    table.to_csv(validation.BANDS_CSV, index=False, float_format="%.12g")
    print(f"wrote {len(table)} bands to {validation.BANDS_CSV}")
