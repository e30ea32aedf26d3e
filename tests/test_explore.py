"""The explorer mechanism: one model function, a static chart with bound params, a live twin."""
import json

import altair as alt
import pandas as pd
import pytest

from companion import explore
from companion.explore import render


def model(a, kind):
    return pd.DataFrame({"x": [0, 1, 2], "y": [0, a, 2 * a], "kind": kind})


CONTROLS = [explore.Slider("a", 0.5, 2.0, 0.5, 1.0), explore.Choice("kind", ("p", "q"), "p")]


def test_grid_evaluates_every_combination():
    df = explore.evaluate_grid(model, CONTROLS)
    assert len(df) == 4 * 2 * 3
    assert sorted(df["_a"].unique()) == [0.5, 1.0, 1.5, 2.0]
    assert set(df["_kind"]) == {"p", "q"}


def test_static_chart_binds_sliders_and_filters():
    spec = explore.static(model, CONTROLS, x="x:Q", y="y:Q").to_dict()
    params = {p["name"]: p for p in spec["params"]}
    assert params["p_a"]["bind"]["input"] == "range" and params["p_a"]["value"] == 1.0
    assert params["p_kind"]["bind"]["input"] == "select"
    filters = [t["filter"] for t in spec["transform"]]
    assert any("p_a" in f for f in filters) and any("p_kind" in f for f in filters)


def test_live_twin_builds_widgets():
    ui = explore.live(model, CONTROLS, x="x:Q", y="y:Q")
    sliders = ui.children[0].children
    assert [type(w).__name__ for w in sliders] == ["FloatSlider", "Dropdown"]
    assert sliders[0].value == 1.0 and sliders[1].value == "p"


def test_renderer_emits_no_network_address(monkeypatch):
    monkeypatch.setenv("COMPANION_SITE_BUILD", "1")
    chart = alt.Chart(pd.DataFrame({"x": [1], "y": [2]})).mark_point().encode(x="x", y="y")
    html = render.offline_renderer(chart.to_dict())["text/html"]
    assert "vegaEmbed" in html and "http" not in html.replace('"$schema": "https://vega.github.io', "")
    assert "cdn" not in html.lower()


def test_renderer_inlines_bundle_once_outside_the_site(monkeypatch):
    monkeypatch.setenv("COMPANION_SITE_BUILD", "0")
    monkeypatch.setitem(render._state, "bundle_sent", False)
    first = render.offline_renderer({"mark": "point"})["text/html"]
    second = render.offline_renderer({"mark": "point"})["text/html"]
    assert "window.vegaEmbed=" in first.replace(" ", "") and len(second) < 5000


def test_chart_html_escapes_script_end():
    html = render.chart_html({"title": "</script><b>"}, div_id="d")
    assert "</script><b>" not in html


@pytest.mark.parametrize("bad, err", [
    (dict(name="a", min=0, max=1, step=0, value=0), ValueError),
    (dict(name="a", min=1, max=0, step=0.1, value=0.5), ValueError),
    (dict(name="a", min=0, max=1, step=0.1, value=2), ValueError),
    (dict(name="a", min="0", max=1, step=0.1, value=0), TypeError),
    # off the grid: the static chart would start empty where the live slider draws
    (dict(name="a", min=100, max=1500, step=200, value=800), ValueError),
    (dict(name="a", min=0, max=1, step=0.3, value=0.3), ValueError),
])
def test_bad_slider(bad, err):
    with pytest.raises(err, match="a"):
        explore.Slider(**bad)


def test_bad_controls_and_model():
    with pytest.raises(ValueError, match="not among"):
        explore.Choice("k", ("p",), "z")
    with pytest.raises(TypeError, match="Slider or Choice"):
        explore.static(model, [("a", 1)], x="x:Q", y="y:Q")
    with pytest.raises(TypeError, match="DataFrame"):
        explore.static(lambda a: [a], [explore.Slider("a", 0, 1, 1, 0)], x="x:Q", y="y:Q")
    with pytest.raises(ValueError, match="combinations"):
        explore.evaluate_grid(model, [explore.Slider("a", 0, 10000, 1, 0), CONTROLS[1]])
    with pytest.raises(ValueError, match="mark"):
        explore.static(model, CONTROLS, x="x:Q", y="y:Q", mark="pie")


def test_every_static_explorer_has_its_live_twin():
    # the design card: each explorer is a static chart (the published site) and a live
    # ipywidgets version (Jupyter) over the same model function, the live one marked so that
    # nbval ignores its random widget ids
    import json
    import pathlib
    import re
    book = pathlib.Path(__file__).resolve().parents[1] / "book"
    assert len(list(book.glob("*.ipynb"))) >= 10
    for path in sorted(book.glob("*.ipynb")):
        static, live = [], []
        for cell in json.load(open(path, encoding="utf-8"))["cells"]:
            src = "".join(cell["source"])
            static += re.findall(r"explore\.static\(\s*([^,]+),", src)
            found = re.findall(r"explore\.live\(\s*([^,]+),", src)
            if found:
                assert "nbval-ignore-output" in cell["metadata"].get("tags", []), (path, found)
            live += found
        assert sorted(static) == sorted(live), (path, static, live)
