"""Explorers: every chapter turns a model function into a static chart and a live widget.

Importing this package activates the offline altair renderer (:mod:`companion.explore.render`).
"""
from . import render
from .core import Choice, Slider, evaluate_grid, live, static

render.enable()

__all__ = ["Choice", "Slider", "evaluate_grid", "live", "static", "render"]
