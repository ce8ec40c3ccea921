"""Charts readable at their printed size, tensor names whole in the HTML, an install hint that installs.

Log axes are read back from the matplotlib figure the plot function draws (tick positions and their labels, parsed
here on their own), the confusion matrices' text sizes scaled by the printed width that report.css and the A4 page
give the PNG, and every name the HTML shortens with "…" is checked against the strings of report.json. Fast and
without TensorFlow, but for one `pip install --dry-run` against the configured index (skipped when none answers).
"""

import base64
import dataclasses
import json
import math
import re
import shlex
import struct
import subprocess
import sys
import tomllib
from html.parser import HTMLParser
from pathlib import Path

import numpy as np
import pytest

from reporter.core.formatting import shorten
from reporter.pipeline.conclude import report_from_json
from reporter.render import formats as render
from reporter.render import plots

ROOT = Path(__file__).resolve().parents[1]
FIXTURE = Path(__file__).parent / "fixtures" / "report.json"
SUPERSCRIPT = str.maketrans("⁻⁰¹²³⁴⁵⁶⁷⁸⁹", "-0123456789")
NO_IMAGES = {name: "" for name in render.CHARTS}


@pytest.fixture()
def report():
    return report_from_json(FIXTURE.read_text())


def with_layers(base, values, ops):
    """`base` with one layer per RMSE/scale value, op names cycling through `ops`."""
    template = base.layers[0]
    layers = [dataclasses.replace(template, index=i, tensor_name=f"t{i}", op_name=ops[i % len(ops)],
                                  rmse_over_scale=v, range=v * 3 + 0.5, suspect=v > 0.7) for i, v in enumerate(values)]
    return dataclasses.replace(base, layers=layers)


# --- log axes: powers of ten only, one label format, no label on another ------------------------------------------

def parse_label(label: str) -> float:
    """A tick label's value, read independently of the plot code: "0.01", "1,000" or "10⁻⁴"."""
    if re.fullmatch(r"10[⁻⁰¹²³⁴⁵⁶⁷⁸⁹]+", label):
        return 10.0 ** int(label[2:].translate(SUPERSCRIPT))
    return float(label.replace(",", ""))


def label_style(label: str) -> str:
    if re.fullmatch(r"10[⁻⁰¹²³⁴⁵⁶⁷⁸⁹]+", label):
        return "power"
    if re.fullmatch(r"1(,000)*|1(0)*|0\.0*1", label):
        return "plain"
    return f"other: {label!r}"


def visible_ticks(fig, axis: str = "y"):
    """(position, label text, extent) of each major tick inside the axes' view, after drawing."""
    fig.canvas.draw()
    ax = fig.axes[0]
    ticks = ax.yaxis.get_major_ticks() if axis == "y" else ax.xaxis.get_major_ticks()
    lo, hi = sorted(ax.get_ylim() if axis == "y" else ax.get_xlim())
    renderer = fig.canvas.get_renderer()
    out = []
    for tick in ticks:
        loc = tick.get_loc()
        if lo * (1 - 1e-9) <= loc <= hi * (1 + 1e-9) and tick.label1.get_visible() and tick.label1.get_text():
            out.append((loc, tick.label1.get_text(), tick.label1.get_window_extent(renderer)))
    return out


LSTM_OPS = ("UNIDIRECTIONAL_SEQUENCE_LSTM", "STRIDED_SLICE", "FULLY_CONNECTED", "SOFTMAX")


@pytest.mark.parametrize("values, ops", [
    ([0.3, 3.0, 30.0], ("CONV_2D", "ADD", "MUL")),  # 0.3 .. 30
    ([63.5, 0.0, 0.328, 0.275], LSTM_OPS),  # the demo LSTM's: long op names, slanted
    ([0.275, 2.3e-7, 0.31, 0.29, 0.5, 0.27], ("CONV_2D", "MAX_POOL_2D", "MEAN", "FULLY_CONNECTED")),  # 10⁻⁷ .. 1
    ([0.1 + (i * 37 % 150) / 100 for i in range(149)] + [60.0], ("CONV_2D", "PAD")),  # 150 layers
])
def test_log_axis_labels_are_decades_in_one_format_and_never_overlap(report, values, ops):
    plan = plots.layer_rmse_plan(with_layers(report, values, ops))
    assert plan.log
    fig = plots.layer_figure(plan)
    try:
        ticks = visible_ticks(fig)
        ax = fig.axes[0]
        axes_height_in = ax.get_position().height * fig.get_figheight()
    finally:
        plt_close(fig)
    labels = [label for _, label, _ in ticks]
    assert len(ticks) >= 2, labels
    for loc, label, _ in ticks:
        assert math.isclose(math.log10(loc), round(math.log10(loc)), abs_tol=1e-9), (loc, labels)  # a power of ten
        assert math.isclose(parse_label(label), loc, rel_tol=1e-9), (label, loc)  # the label says where it is
    assert len({label_style(label) for label in labels}) == 1, labels  # "1, 0.01, 1.00e-04" is three formats
    assert all(not s.startswith("other") for s in map(label_style, labels)), labels
    boxes = sorted((box.y0, box.y1) for _, _, box in ticks)
    assert all(upper[0] >= lower[1] for lower, upper in zip(boxes, boxes[1:])), boxes  # no label on another
    assert axes_height_in >= 1.3  # slanted op names take room from the figure, not from the bars


def test_the_lstm_chart_gets_the_height_its_slanted_names_need(report):
    """The demo LSTM's op names ("0 UNIDIRECTIONAL_SEQUENCE_LSTM", slanted) took most of a fixed-height figure;
    the chart is now taller by what they need, and a chart with short names keeps the usual height."""
    long_names = plots.layer_rmse_plan(with_layers(report, [63.5, 0.0, 0.328, 0.275], LSTM_OPS))
    short_names = plots.layer_rmse_plan(with_layers(report, [0.3, 3.0, 30.0], ("ADD", "MUL", "SUB")))
    assert long_names.tick_rotation and not short_names.tick_rotation
    assert long_names.height > short_names.height == plots.LAYER_FIGSIZE[1]


def test_a_log_size_axis_in_the_tradeoff_chart_is_decades_too(report):
    steps = report.recommendation.search.steps
    spread = [dataclasses.replace(s, size_bytes=int(s.size_bytes * 10 ** (i % 3))) for i, s in enumerate(steps)]
    search = dataclasses.replace(report.recommendation.search, steps=spread)
    wide = dataclasses.replace(report, recommendation=dataclasses.replace(report.recommendation, search=search))
    import matplotlib.pyplot as plt

    before = set(plt.get_fignums())
    original = plots._data_uri
    caught = {}

    def keep(fig, tight=True):  # read the figure's size axis before it is saved and closed
        caught["ticks"] = visible_ticks(fig, "x")
        return original(fig, tight)

    plots._data_uri = keep
    try:
        assert plots.tradeoff(wide)
    finally:
        plots._data_uri = original
    assert set(plt.get_fignums()) == before
    labels = [label for _, label, _ in caught["ticks"]]
    assert len(labels) >= 2 and len({label_style(label) for label in labels}) == 1, labels
    assert all(math.isclose(parse_label(label), loc, rel_tol=1e-9) for loc, label, _ in caught["ticks"])


def plt_close(fig):
    import matplotlib.pyplot as plt

    plt.close(fig)


# --- confusion matrices at their printed size -----------------------------------------------------------------------

def printed_width_in(selector: str) -> float:
    """The printed width of an image, from report.css's print rule for `selector` (a percentage) and the A4 page
    with the @page margins: what WeasyPrint gives it in report.pdf."""
    css = (ROOT / "templates" / "report.css").read_text()
    print_block = css[css.index("@media print"):]
    share = float(re.search(re.escape(selector) + r"\s*\{\s*width:\s*([\d.]+)%", print_block).group(1)) / 100
    margins = re.search(r"@page\s*\{[^}]*?margin:\s*([\d.]+)mm\s+([\d.]+)mm", css)
    side_mm = float(margins.group(2))
    return share * (210 - 2 * side_mm) / 25.4


def png_width_in(uri: str) -> float:
    """The PNG's width in inches: its pixels over the resolution in its pHYs chunk."""
    data = base64.b64decode(uri.split(",", 1)[1])
    width = struct.unpack(">I", data[16:20])[0]
    at = data.index(b"pHYs")
    per_metre = struct.unpack(">I", data[at + 4:at + 8])[0]
    return width / (per_metre * 0.0254)


def with_matrices(report, matrix):
    """`report` with every measured variant's (and the recommended model's) confusion matrix set to `matrix`."""
    def put(v):
        if v is None or not (v.metrics and v.metrics.confusion_matrix):
            return v
        return dataclasses.replace(v, metrics=dataclasses.replace(v.metrics, confusion_matrix=matrix))

    rec = dataclasses.replace(report.recommendation, selective=put(report.recommendation.selective))
    return dataclasses.replace(report, variants=[put(v) for v in report.variants], recommendation=rec)


def count_texts(fig):
    """Per matrix axes: {(row, column): (text, fontsize)} of the texts drawn in its cells."""
    out = []
    for ax in fig.axes:
        if not ax.images:
            continue
        cells = {}
        for t in ax.texts:
            x, y = t.get_position()
            cells[(int(round(y)), int(round(x)))] = (t.get_text(), t.get_fontsize())
        out.append((ax, cells))
    return out


def ten_classes() -> list:
    rng = np.random.default_rng(7)
    cm = np.diag(rng.integers(30, 60, 10)) + (rng.random((10, 10)) < 0.2) * rng.integers(1, 4, (10, 10))
    return cm.tolist()


@pytest.mark.parametrize("matrix", [None, "ten"], ids=["fixture-binary", "ten-classes"])
def test_confusion_counts_are_legible_when_printed_and_zero_cells_are_drawn(report, matrix):
    if matrix == "ten":
        report = with_matrices(report, ten_classes())
    scale = printed_width_in("#confusion img") / png_width_in(plots.confusion_matrices(report))
    fig = plots.confusion_figure(report)
    try:
        matrices = count_texts(fig)
        shown = plots._confusion_variants(report)
        assert len(matrices) == len(shown)
        assert any(0 in sum(v.metrics.confusion_matrix, []) for v in shown)  # the case in point: empty cells
        for (ax, cells), v in zip(matrices, shown):
            cm = np.array(v.metrics.confusion_matrix)
            for (i, j), count in np.ndenumerate(cm):
                text, size = cells[(i, j)]  # every cell written, the empty ones too
                assert text == str(count)
                assert size * scale >= 7.0 - 1e-6, (size, scale)  # the printed point size
            # An empty cell is white; a cell with a sample is a grey that prints (at most 93 % white), however few.
            rgba = ax.images[0].to_rgba(ax.images[0].get_array())[..., :3]
            assert np.all(rgba[cm == 0] > 0.999) and np.all(rgba[cm > 0].max(axis=-1) <= 0.93)
    finally:
        plt_close(fig)


def test_many_classes_show_counts_only_where_they_fit_and_say_so(report):
    k = 30
    cm = (np.eye(k, dtype=int) * 150 + (np.arange(k * k).reshape(k, k) % 7 == 0)).tolist()
    many = with_matrices(report, cm)
    scale = printed_width_in("#confusion img") / png_width_in(plots.confusion_matrices(many))
    fig = plots.confusion_figure(many)
    try:
        notes = [t.get_text() for t in fig.texts] + [fig._supxlabel.get_text() if fig._supxlabel else ""]
        for ax, cells in count_texts(fig):
            assert len(cells) < k * k  # three-digit counts do not fit a 30-class matrix at 7 pt
            assert all(size * scale >= 7.0 - 1e-6 for _, size in cells.values())
            assert len(ax.get_xticks()) <= 20  # class labels thinned, not piled up
    finally:
        plt_close(fig)
    assert any("only where it fits" in note for note in notes), notes


# --- full tensor names in the HTML ----------------------------------------------------------------------------------

class _Titles(HTMLParser):
    """Each text node that holds "…", with the title of the innermost element around it that has one."""

    VOID = {"br", "wbr", "img", "meta", "link", "col", "hr", "input"}

    def __init__(self):
        super().__init__()
        self.stack = []  # (tag, title or None)
        self.found = []  # (text, title or None, inside <pre>)

    def handle_starttag(self, tag, attrs):
        if tag not in self.VOID:
            self.stack.append((tag, dict(attrs).get("title")))

    def handle_endtag(self, tag):
        while self.stack:
            if self.stack.pop()[0] == tag:
                break

    def handle_data(self, data):
        if "…" in data:
            title = next((t for _, t in reversed(self.stack) if t is not None), None)
            self.found.append((data, title, any(tag == "pre" for tag, _ in self.stack)))


def shortened_names(html: str):
    """(visible text, title) for each piece of the HTML shortened with "…" (a text node between tags, <wbr> joined)."""
    parser = _Titles()
    parser.feed(html.replace("<wbr>", ""))
    return parser.found


def json_strings(value) -> set:
    if isinstance(value, str):
        return {value}
    if isinstance(value, dict):
        return set().union(*(json_strings(k) | json_strings(v) for k, v in value.items())) if value else set()
    if isinstance(value, list):
        return set().union(*(json_strings(v) for v in value)) if value else set()
    return set()


def assert_every_shortened_name_is_titled(html: str, report_json: str) -> int:
    """Every name the HTML shortens ("head…tail") sits in an element whose title is a string of report.json that
    starts with that head and ends with that tail; returns how many were checked."""
    strings = json_strings(json.loads(report_json))
    checked = 0
    for text, title, in_pre in shortened_names(html):
        if in_pre:
            continue  # the Analyzer's text, as the Analyzer wrote it
        if title is None:
            assert not re.search(r"\S{3}…\S{3}", text), f"{text!r} is shortened and has no title"
            continue
        if not re.search(r"\S{3}…\S{3}", text):
            continue
        head, _, tail = text.partition("…")
        assert title in strings, f"title {title!r} is not a string of report.json"
        assert title.startswith(head) and title.endswith(tail) and len(title) > len(head) + len(tail), (text, title)
        checked += 1
    return checked


def test_every_shortened_name_in_the_html_carries_its_full_name(report):
    html = render.render_html(report, NO_IMAGES).decode("utf-8")
    checked = assert_every_shortened_name_is_titled(html, FIXTURE.read_text())
    # The fixture shortens names in the layer table and in the search's candidates.
    assert checked >= 8
    assert 'title="breast_cancer_mlp_1/dense_3_1/MatMul;breast_cancer_mlp_1/dense_3_1/BiasAdd"' in html


def test_a_hostile_long_name_is_titled_and_stays_text(report):
    hostile = "model/<script>alert('x')</script>/" + "a" * 40 + '/"quoted" & more/<img src=x onerror=1>/BiasAdd'
    steps = list(report.recommendation.search.steps)
    i = next(i for i, s in enumerate(steps) if s.phase != "fiq")
    steps[i] = dataclasses.replace(steps[i], denylisted_nodes=[hostile], change=f"+ layer {shorten(hostile, 50)}")
    layers = [dataclasses.replace(report.layers[0], tensor_name=hostile)] + list(report.layers[1:])
    search = dataclasses.replace(report.recommendation.search, steps=steps)
    hostile_report = dataclasses.replace(report, layers=layers,
                                         recommendation=dataclasses.replace(report.recommendation, search=search))
    html = render.render_html(hostile_report, NO_IMAGES).decode("utf-8")
    assert "<script>" not in html and "<img src=x" not in html  # escaped text, in the titles too
    titled = [title for _, title, _ in shortened_names(html)]
    assert titled.count(hostile) >= 2  # the layer table's cell and the candidate's change
    assert assert_every_shortened_name_is_titled(html, hostile_report.to_json()) >= 2


def test_report_json_and_the_csvs_hold_full_names(report):
    from reporter.debug.blame import csv_text
    from reporter.model.variant import LayerError, LayerErrors

    assert not any("…" in layer.tensor_name for layer in report.layers)
    assert all("…" not in n for n in report.recommendation.denylisted_nodes)
    long = report.recommendation.denylisted_nodes[-1]
    assert len(long) > render.TENSOR_NAME_LIMIT and long in report.to_json()
    fields = {f.name for f in dataclasses.fields(LayerError)}
    row = {name: None for name in fields} | {"index": 0, "op_name": "ADD", "tensor_name": long}
    errors = LayerErrors(layers=[LayerError(**{k: v for k, v in row.items() if k in fields})], samples=1)
    import csv
    import io

    rows = list(csv.DictReader(io.StringIO(csv_text(errors))))
    assert rows[0]["tensor_name"] == long


# --- the Model Explorer hint ----------------------------------------------------------------------------------------

class _Code(HTMLParser):
    def __init__(self):
        super().__init__()
        self.inside, self.codes = False, []

    def handle_starttag(self, tag, attrs):
        if tag == "code":
            self.inside, self.codes = True, self.codes + [""]

    def handle_endtag(self, tag):
        if tag == "code":
            self.inside = False

    def handle_data(self, data):
        if self.inside:
            self.codes[-1] += data


def explorer_hint(report) -> list[str]:
    """The requirements of the `pip install` the HTML's Model Explorer section names (a variant with overlays)."""
    variants = [dataclasses.replace(v, overlays=[f"explorer_{v.name}_snr_db.json"]) if v.name == "fiq" else v
                for v in report.variants]
    html = render.render_html(dataclasses.replace(report, variants=variants), NO_IMAGES).decode("utf-8")
    assert "quant-report[" not in html  # an extra of a package no index serves
    parser = _Code()
    parser.feed(html[html.index('id="model-explorer"'):])
    command = next(shlex.split(c) for c in parser.codes if c.startswith("pip install"))
    assert command[:2] == ["pip", "install"] and not any(arg.startswith("-") for arg in command[2:])
    return command[2:]


def test_the_explorer_hint_installs_the_extras_own_packages(report):
    extra = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]["explorer"]
    assert explorer_hint(report) == extra


NETWORK_TROUBLE = ("NewConnectionError", "Network is unreachable", "Temporary failure in name resolution",
                   "Max retries exceeded", "Could not fetch URL", "ConnectTimeout", "ReadTimeout", "SSLError",
                   "ProxyError")


def test_the_explorer_hints_pip_command_resolves_on_the_configured_index(report, tmp_path):
    requirements = explorer_hint(report)
    out = tmp_path / "pip-report.json"
    run = subprocess.run([sys.executable, "-m", "pip", "install", "--dry-run", "--no-deps", "--ignore-installed",
                          "--quiet", "--timeout", "15", "--retries", "0", "--report", str(out), *requirements],
                         capture_output=True, text=True, timeout=300)
    if run.returncode != 0 and any(s in run.stdout + run.stderr for s in NETWORK_TROUBLE):
        pytest.skip("no package index reachable from this machine: " + (run.stderr.strip().splitlines() or [""])[-1])
    assert run.returncode == 0, run.stdout + run.stderr
    installed = {re.sub(r"[-_.]+", "-", item["metadata"]["name"].lower())
                 for item in json.loads(out.read_text())["install"]}
    wanted = {re.sub(r"[-_.]+", "-", re.match(r"[A-Za-z0-9_.-]+", r).group(0).lower()) for r in requirements}
    assert installed == wanted
