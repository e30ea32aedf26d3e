"""One model, two explorers: a static altair chart with sliders and a live ipywidgets twin.

A chapter supplies a model function ``fn(**controls) -> pandas.DataFrame`` (long form: one row
per plotted point) and a list of controls. :func:`static` evaluates ``fn`` on every grid point
of the controls, stores all frames in the chart, and binds altair params to sliders/menus that
filter them: it works on the published site with no kernel. :func:`live` calls the very same
``fn`` on each widget change in Jupyter. Both draw through one private function, so the two views can
not drift apart.
"""
from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Callable, Sequence

import altair as alt
import numpy as np
import pandas as pd

from .. import checks
from . import render

MAX_GRID_POINTS = 5000  # model evaluations a static chart may embed; keeps pages light


@dataclass(frozen=True)
class Slider:
    """A numeric control: values ``min, min+step, ..., max``; ``value`` is the start."""
    name: str
    min: float
    max: float
    step: float
    value: float
    label: str | None = None

    def __post_init__(self):
        for p in ("min", "max", "step", "value"):
            checks.number(f"Slider({self.name!r}).{p}", getattr(self, p))
        if self.step <= 0 or self.max <= self.min:
            raise ValueError(f"Slider {self.name!r}: need step > 0 and max > min; got "
                             f"min={self.min}, max={self.max}, step={self.step}")
        if not self.min <= self.value <= self.max:
            raise ValueError(f"Slider {self.name!r}: value={self.value} outside [{self.min}, {self.max}]")
        # the static chart precomputes the grid: a start or end off it would show nothing
        # there while the live slider draws data
        for p in ("value", "max"):
            steps = (getattr(self, p) - self.min) / self.step
            if abs(steps - round(steps)) > 1e-9:
                raise ValueError(f"Slider {self.name!r}: {p}={getattr(self, p)} is not on the grid "
                                 f"min + k x step ({self.min} + k x {self.step})")

    @property
    def integer(self) -> bool:
        return all(float(v).is_integer() for v in (self.min, self.max, self.step, self.value))

    def grid(self) -> list:
        n = int(round((self.max - self.min) / self.step))
        vals = [self.min + i * self.step for i in range(n + 1)]
        return [int(v) for v in vals] if self.integer else [round(v, 12) for v in vals]


@dataclass(frozen=True)
class Choice:
    """A categorical control (a menu): one of ``options``."""
    name: str
    options: tuple
    value: object
    label: str | None = None

    def __post_init__(self):
        object.__setattr__(self, "options", tuple(self.options))
        if self.value not in self.options:
            raise ValueError(f"Choice {self.name!r}: value {self.value!r} not among {self.options}")

    def grid(self) -> list:
        return list(self.options)


Control = Slider | Choice


def log_grid(lo: float, hi: float, points: int) -> np.ndarray:
    """``points`` values from ``lo`` to ``hi``, evenly spaced in log, rounded to 12 significant
    digits: numpy's vectorized power differs in the last bit between CPUs' SIMD paths, and a
    chart's stored data (which nbval compares) must be the same on every machine."""
    checks.number("lo", lo, positive=True)
    checks.number("hi", hi, positive=True, minimum=lo)
    n = checks.number("points", points, integer=True, minimum=2,
                      maximum=checks.MAX_GRID_POINTS)
    return np.array([float(f"{v:.12g}") for v in np.logspace(np.log10(lo), np.log10(hi), n)])


def _check_controls(controls: Sequence[Control]) -> list[Control]:
    controls = list(controls)
    for c in controls:
        if not isinstance(c, (Slider, Choice)):
            raise TypeError(f"controls must be Slider or Choice objects; got {type(c).__name__}")
    names = [c.name for c in controls]
    if len(set(names)) != len(names):
        raise ValueError(f"control names must be unique; got {names}")
    return controls


def evaluate_grid(fn: Callable[..., pd.DataFrame], controls: Sequence[Control]) -> pd.DataFrame:
    """``fn`` at every combination of control values, with the controls as extra columns."""
    controls = _check_controls(controls)
    grids = [c.grid() for c in controls]
    total = int(np.prod([len(g) for g in grids])) if grids else 1
    if total > MAX_GRID_POINTS:
        raise ValueError(f"the controls span {total} combinations, more than {MAX_GRID_POINTS}: "
                         "use coarser steps or fewer controls")
    frames = []
    for combo in itertools.product(*grids):
        kwargs = dict(zip([c.name for c in controls], combo))
        df = fn(**kwargs)
        if not isinstance(df, pd.DataFrame):
            raise TypeError(f"the model function must return a pandas DataFrame; got {type(df).__name__}")
        frames.append(df.assign(**{f"_{k}": v for k, v in kwargs.items()}))
    return pd.concat(frames, ignore_index=True)


def _draw(data: pd.DataFrame, x: str, y: str, color: str | None, mark: str,
          title: str | None, width: int, height: int, tooltip: Sequence[str] | None,
          x_scale: str, y_scale: str) -> alt.Chart:
    # A scale is named only when asked for: a linear scale forced on a nominal axis (bars)
    # makes vega-lite fall back to a band scale with a console warning.
    enc = {"x": alt.X(x, scale=alt.Scale(type=x_scale)) if x_scale != "linear" else alt.X(x),
           "y": alt.Y(y, scale=alt.Scale(type=y_scale)) if y_scale != "linear" else alt.Y(y)}
    if color:
        enc["color"] = color
    if tooltip:
        enc["tooltip"] = list(tooltip)
    marker = getattr(alt.Chart(data), f"mark_{mark}")
    props = {"point": True} if mark == "line" else {}
    return marker(**props).encode(**enc).properties(
        width=width, height=height, **({"title": title} if title else {}))


def _param(c: Control) -> alt.Parameter:
    label = c.label or c.name
    if isinstance(c, Slider):
        bind = alt.binding_range(min=c.min, max=c.max, step=c.step, name=f"{label} ")
    else:
        bind = alt.binding_select(options=list(c.options), name=f"{label} ")
    return alt.param(name=f"p_{c.name}", value=c.value, bind=bind)


def static(fn: Callable[..., pd.DataFrame], controls: Sequence[Control], *, x: str, y: str,
           color: str | None = None, mark: str = "line", title: str | None = None,
           width: int = 480, height: int = 300, tooltip: Sequence[str] | None = None,
           x_scale: str = "linear", y_scale: str = "linear") -> alt.Chart:
    """A chart whose sliders/menus work in a static page (no kernel needed).

    ``x``, ``y``, ``color`` and ``tooltip`` use altair's shorthand (``"size_bytes:Q"``);
    ``color`` may also be an ``alt.Color`` (to fix a colour domain across frames).
    """
    checks.choice("mark", mark, ["line", "point", "bar", "area"])
    controls = _check_controls(controls)
    data = evaluate_grid(fn, controls)
    chart = _draw(data, x, y, color, mark, title, width, height, tooltip, x_scale, y_scale)
    params = [_param(c) for c in controls]
    chart = chart.add_params(*params)
    for c, p in zip(controls, params):
        if isinstance(c, Slider):
            # Float grids: compare within half a step rather than with ==.
            chart = chart.transform_filter(f"abs(datum['_{c.name}'] - {p.name}) < {c.step / 2}")
        else:
            chart = chart.transform_filter(f"datum['_{c.name}'] == {p.name}")
    return chart


def _widget(c: Control):
    import ipywidgets as w
    desc = c.label or c.name
    style = {"description_width": "initial"}
    if isinstance(c, Choice):
        return w.Dropdown(options=list(c.options), value=c.value, description=desc, style=style)
    cls = w.IntSlider if c.integer else w.FloatSlider
    kw = dict(min=c.min, max=c.max, step=c.step, value=c.value, description=desc, style=style,
              continuous_update=False)
    return cls(**{k: (int(v) if c.integer and k in ("min", "max", "step", "value") else v)
                  for k, v in kw.items()})


def live(fn: Callable[..., pd.DataFrame], controls: Sequence[Control], *, x: str, y: str,
         color: str | None = None, mark: str = "line", title: str | None = None,
         width: int = 480, height: int = 300, tooltip: Sequence[str] | None = None,
         x_scale: str = "linear", y_scale: str = "linear", show_table: bool = False):
    """The live twin of :func:`static`: ipywidgets that re-run ``fn`` on every change."""
    import ipywidgets as w
    from IPython.display import display

    checks.choice("mark", mark, ["line", "point", "bar", "area"])
    controls = _check_controls(controls)
    widgets = {c.name: _widget(c) for c in controls}
    out = w.Output()

    def update(**kwargs):
        df = fn(**kwargs)
        with out:
            out.clear_output(wait=True)
            display(_draw(df, x, y, color, mark, title, width, height, tooltip, x_scale, y_scale))
            if show_table:
                display(df)

    w.interactive_output(update, widgets)
    render.enable()
    return w.VBox([w.HBox(list(widgets.values()), layout=w.Layout(flex_flow="row wrap")), out])
