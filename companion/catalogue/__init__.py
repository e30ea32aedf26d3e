"""The book's exercises, one module per chapter (``catalogue/hardware.py`` ...).

Each module calls :func:`companion.exercises.register` with answers that ask the companion's
models, never typed numbers. :func:`load_all` imports every chapter module once.
"""
import importlib
import pkgutil


def load_all() -> None:
    for mod in pkgutil.iter_modules(__path__):
        importlib.import_module(f"{__name__}.{mod.name}")
