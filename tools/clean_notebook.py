"""Normalise a notebook after `make notebooks`: drop volatile metadata so diffs show content.

Keeps outputs (nbval compares them) and the saved widget state (the static site shows it).
"""
import sys

import nbformat


def clean(path: str) -> None:
    nb = nbformat.read(path, as_version=4)
    for cell in nb.cells:
        cell.metadata.pop("execution", None)
        if cell.cell_type == "code":
            for out in cell.get("outputs", []):
                out.get("metadata", {}).pop("execution", None)
    nb.metadata.pop("papermill", None)
    nb.metadata.get("language_info", {}).pop("version", None)
    nb.metadata["kernelspec"] = {"display_name": "Python 3", "language": "python", "name": "python3"}
    nbformat.write(nb, path)


if __name__ == "__main__":
    for p in sys.argv[1:]:
        clean(p)
