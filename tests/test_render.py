"""Rendering from report.json alone: golden files, HTML structure, hostile names, PDF, no TensorFlow.

Refresh the gold files after an intended change:  python -m pytest tests/test_render.py --refresh-gold
"""

import json
import dataclasses
import io
import re
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path

import pytest

from reporter.pipeline.conclude import report_from_json
from reporter.render import formats as render
from reporter.model.report import SCHEMA_VERSION
from reporter.core.formatting import shorten
from reporter.render.view import ReportView

HERE = Path(__file__).parent
FIXTURE = HERE / "fixtures" / "report.json"
GOLD = HERE / "gold"


@pytest.fixture()
def report():
    return report_from_json(FIXTURE.read_text())


def _scrub(text: str) -> str:
    """Images depend on the matplotlib/freetype build; the gold compares everything else."""
    return re.sub(r"data:image/png;base64,[A-Za-z0-9+/=]+", "data:image/png;base64,SCRUBBED", text)


@pytest.mark.parametrize("fmt,gold", [("html", "report.html"), ("md", "summary.md")])
def test_golden_files(report, request, fmt, gold):
    actual = _scrub(render.render(report, fmt).decode("utf-8"))
    path = GOLD / gold
    if request.config.getoption("--refresh-gold"):
        path.write_text(actual, encoding="utf-8")
    assert path.exists(), f"no gold file {path}: run with --refresh-gold"
    assert actual == path.read_text(encoding="utf-8"), f"{gold} differs from the gold: see the diff above"


class _Collector(HTMLParser):
    def __init__(self):
        super().__init__()
        self.tags = []  # (tag, attrs dict)
        self.tables = {}  # id -> list of rows, each a (row attrs, [cell texts])
        self._table = None
        self._row = None
        self._cell = None

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        self.tags.append((tag, attrs))
        if tag == "table":
            self._table = attrs.get("id")
            self.tables[self._table] = []
        elif tag == "tr" and self._table is not None:
            self._row = (attrs, [])
            self.tables[self._table].append(self._row)
        elif tag in ("td", "th") and self._row is not None:
            self._cell = []

    def handle_endtag(self, tag):
        if tag in ("td", "th") and self._cell is not None:
            self._row[1].append("".join(self._cell).strip())
            self._cell = None
        elif tag == "table":
            self._table = None

    def handle_data(self, data):
        if self._cell is not None:
            self._cell.append(data)


def _parse(html: bytes) -> _Collector:
    c = _Collector()
    c.feed(html.decode("utf-8"))
    return c


def test_html_structure(report):
    doc = _parse(render.render(report, "html"))
    names = ReportView(report).column_labels
    assert names == ["Float", "DRQ", "FIQ", "FIQ with 2 ops in float"]
    for table in ("tensor-types", "metrics", "size-latency", "ops"):
        assert doc.tables[table][0][1][1:] == names, table  # one column per variant
    metrics = {row[1][0]: row[1][1:] for row in doc.tables["metrics"][1:]}
    fiq = report.variant("fiq").metrics
    assert metrics["Accuracy"][2].startswith(f"{fiq.accuracy:.3f}")
    assert metrics["Accuracy"][2].endswith("↓↓")
    # The story panel comes first: one row per variant (the rule's pick stays in the search section).
    panel = {row[1][0]: row[1][1:] for row in doc.tables["headline"][1:]}
    assert list(panel) == names
    found = report.findings
    for name, label in zip(("float", "drq", "fiq", "selective"), names):
        f = found.variant(name)
        assert panel[label][0] == f"{f.accuracy * 100:.1f} %"
        assert panel[label][2] == ("reference" if name == "float" else f.vs_float.text)
    layer_rows = doc.tables["layer-table"][1:]
    assert len(layer_rows) == len(report.layers)
    kept_rows = [r for r in layer_rows if r[0].get("class") == "suspect"]
    rec = report.recommendation
    # Long tensor names are shortened in the middle, the full name on hover.
    assert [r[1][2] for r in kept_rows] == [shorten(n, render.TENSOR_NAME_LIMIT) for n in rec.denylisted_nodes]
    titles = {a.get("title") for t, a in doc.tags if t == "span"}
    assert {n for n in rec.denylisted_nodes if len(n) > render.TENSOR_NAME_LIMIT} <= titles
    assert all("KEEP FLOAT" in r[1][-1] for r in kept_rows)
    assert [r[1][2] for r in doc.tables["kept"][1:]] == rec.denylisted_nodes
    # The trade-off: one row per distinct candidate, plus the rule's pick; the recommended one marked.
    distinct = {tuple(s.denylisted_nodes) for s in rec.search.steps}
    tradeoff = doc.tables["tradeoff"][1:]
    assert len(tradeoff) == len(distinct) + 1
    chosen = [r for r in tradeoff if r[0].get("class") == "chosen"]
    assert len(chosen) == 1 and "PICKED" in chosen[0][1][-1]
    assert chosen[0][1][0] == str(len(rec.denylisted_nodes))
    assert chosen[0][1][4] == f"{rec.selective.metrics.accuracy:.3f}"
    assert [r for r in tradeoff if r[0].get("class") == "rule"][0][1][4] == f"{rec.rule.selective.metrics.accuracy:.3f}"
    before_after = {row[1][0]: row[1][1:] for row in doc.tables["before-after"][1:]}
    assert list(before_after) == ["Accuracy", "Share of the gap won back", "Size", "Latency, median",
                                  "Float32 tensors"]
    assert before_after["Accuracy"][3] == found.fix.vs_fiq.text  # against FIQ, and against float
    assert before_after["Accuracy"][4] == found.fix.vs_float.text
    section_ids = [a.get("id") for t, a in doc.tags if t == "section"]
    assert section_ids == ["story", "quality", "recommendation", "layers", "structure", "appendix"]


def test_html_is_self_contained(report):
    doc = _parse(render.render(report, "html"))
    images = [a["src"] for t, a in doc.tags if t == "img"]
    assert len(images) == 4  # confusion matrices, RMSE/scale and range charts, the search's trade-off
    assert all(src.startswith("data:image/png;base64,") for src in images)
    for tag, attrs in doc.tags:
        assert tag not in ("script", "link", "iframe", "object", "embed"), tag
        for key in ("src", "href", "srcset", "action", "poster", "data"):
            if key in attrs:
                # Links (never fetched) may point at the Analyzer's text files written beside the report.
                beside = tag == "a" and key == "href" and re.fullmatch(r"analyzer_[a-z0-9_]+\.txt", attrs[key])
                assert beside or attrs[key].startswith(("data:", "#")), (tag, key, attrs[key][:60])
    css = re.search(r"<style>(.*?)</style>", render.render(report, "html").decode(), re.S).group(1)
    assert "url(" not in css and "@import" not in css


def _hostile(report):
    names = {layer.tensor_name: f"<script>alert({i})</script>|`x`" for i, layer in enumerate(report.layers)}
    layers = [dataclasses.replace(layer, tensor_name=names[layer.tensor_name]) for layer in report.layers]
    rec = dataclasses.replace(report.recommendation,
                              denylisted_nodes=[names[n] for n in report.recommendation.denylisted_nodes])
    from reporter.pipeline import conclude

    changed = dataclasses.replace(
        report, model=dataclasses.replace(report.model, name="<img src=x onerror=alert(1)>"), layers=layers,
        recommendation=rec, findings=None,
    )
    return conclude.attach(changed)


def test_hostile_names_render_as_text(report):
    hostile = _hostile(report)
    html = render.render(hostile, "html").decode()
    assert "<img src=x" not in html and "<script>" not in html
    assert "&lt;img src=x onerror=alert(1)&gt;" in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html.replace("<wbr>", "")
    doc = _parse(html.encode())
    assert [t for t, _ in doc.tags if t == "script"] == []
    md = render.render(hostile, "md").decode()
    rendered = _markdown_to_html(md)  # as GitHub would show it
    assert "<script>" not in rendered and "<img" not in rendered
    assert "&lt;script&gt;alert(0)&lt;/script&gt;" in rendered  # the name, as text
    for table in re.findall(r"<table>.*?</table>", rendered, re.S):  # pipes escaped: every row keeps its columns
        widths = {len(re.findall(r"<t[hd][ >]", row)) for row in re.findall(r"<tr>.*?</tr>", table, re.S)}
        assert len(widths) == 1, table
    pdf = render.render(hostile, "pdf")
    assert pdf.startswith(b"%PDF")


def _markdown_to_html(md: str) -> str:
    from markdown_it import MarkdownIt

    return MarkdownIt("commonmark", {"html": True}).enable("table").render(md)


def _words(text: str) -> str:
    return " ".join(text.split())


def test_pdf_pages_and_text(report):
    from pypdf import PdfReader

    pdf = PdfReader(io.BytesIO(render.render(report, "pdf")))
    assert 3 <= len(pdf.pages) <= 15
    text = "\n".join(page.extract_text() for page in pdf.pages)
    for title in ("Model structure", "Quality on the evaluation data", "Per-layer errors", "The model to ship",
                  "Appendix", "page 1 of"):
        assert title in text, title
    # Page 1 holds the story: the panel (every variant's accuracy) and the headline sentences.
    first = _words(pdf.pages[0].extract_text())
    assert "Against float" in first
    for f in report.findings.variants:
        if f.name != "rule":
            assert f"{f.accuracy * 100:.1f} %" in first, f.name
    for sentence in report.findings.headline:
        assert _words(sentence)[:60] in first
    fiq = report.variant("fiq").metrics
    assert f"{fiq.accuracy:.3f}" in text
    assert f"{report.recommendation.selective.metrics.accuracy:.3f}" in text


def test_pdf_fetches_nothing_but_data_uris(tmp_path):
    import weasyprint

    secret = tmp_path / "secret.png"
    secret.write_bytes(b"not really a png")
    fetcher = render.DataOnlyFetcher()
    html = f'<p>x</p><img src="file://{secret}"><img src="http://example.invalid/a.png">'
    weasyprint.HTML(string=html, url_fetcher=fetcher).write_pdf()
    assert fetcher.refused == [f"file://{secret}", "http://example.invalid/a.png"]


def test_output_is_reproducible(report):
    for fmt in ("html", "md", "pdf", "json"):
        assert render.render(report, fmt) == render.render(report, fmt), fmt


def test_markdown_summary_fits_a_pr_comment(report):
    md = render.render(report, "md").decode()
    assert len(md.splitlines()) < 60
    assert not re.search(r"&[a-z]+;|&#\d+;", md)  # no HTML entities: GitHub would show them raw in code
    rendered = _markdown_to_html(md)
    for sentence in report.findings.headline:
        assert _words(sentence) in _words(re.sub(r"<[^>]+>", "", rendered).replace("&lt;", "<")
                                          .replace("&gt;", ">").replace("&amp;", "&").replace("&quot;", '"')
                                          .replace("&#39;", "'"))
    assert "| Variant | Accuracy | 95 % interval | Against float (paired) |" in md
    assert "| Variant | Size | Latency (median) |" in md  # size and latency in their own table
    for name in report.recommendation.denylisted_nodes:  # in code spans, shortened in the middle
        assert f"`{shorten(name, 48)}`" in md


def test_json_round_trip(report):
    again = report_from_json(render.render(report, "json").decode())
    assert again == report
    assert again.to_json() == FIXTURE.read_text()


def test_a_version_1_report_still_renders():
    """report.json files written before the search (schema 1) are migrated when read."""
    v1_text = (HERE / "fixtures" / "report_v1.json").read_text()
    assert json.loads(v1_text)["schema_version"] == 1
    old = report_from_json(v1_text)
    assert old.schema_version == SCHEMA_VERSION and old.recommendation.method == "rule"
    assert old.recommendation.search is None and old.layers[0].propagated_rmse_over_scale is None
    html = render.render(old, "html").decode()
    md = render.render(old, "md").decode()
    for layer in old.layers:
        if layer.tensor_name in old.recommendation.denylisted_nodes:
            assert layer.tensor_name in html.replace("<wbr>", "") and shorten(layer.tensor_name, 48) in md
    assert _words(old.findings.recommendation) in _words(md.replace("\\", ""))
    assert render.render(old, "pdf").startswith(b"%PDF")


def test_a_version_2_report_still_renders():
    """report.json files written before the findings (schema 2) get them derived when read."""
    v2_text = (HERE / "fixtures" / "report_v2.json").read_text()
    assert json.loads(v2_text)["schema_version"] == 2 and "findings" not in json.loads(v2_text)
    old = report_from_json(v2_text)
    assert old.schema_version == SCHEMA_VERSION and old.findings.gap.status == "recovered"
    assert old.findings.variant("fiq").vs_float.p_value is None  # not recorded in version 2: not invented
    assert "significance not recorded" in old.findings.variant("fiq").verdict
    md = render.render(old, "md").decode()
    assert old.findings.headline[0].split(" (")[0] in md
    html = render.render(old, "html").decode()
    assert 'id="headline"' in html and render.render(old, "pdf").startswith(b"%PDF")


def test_a_report_whose_findings_predate_the_views_fields_renders_as_before(report):
    """A version-5 report.json written before every yes/no a view shows was a findings' field (the latency steps,
    the labels beyond noise) gets its findings derived again when read: its tables show what they showed, FIQ's
    latency against float's by the timing-noise rule (medians further apart than either model's p90 - median)."""
    data = json.loads(FIXTURE.read_text())
    for v in data["findings"]["variants"]:
        for name in ("latency_vs_float", "latency_vs_fiq", "labels_beyond_noise"):
            v.pop(name)
    old = report_from_json(json.dumps(data))
    lat = {v["name"]: v["latency_ms"] for v in data["variants"]}
    flt, fiq = lat["float"], lat["fiq"]
    spread = max(flt["p90"] - flt["median"], fiq["p90"] - fiq["median"])
    assert fiq["median"] - flt["median"] > spread and fiq["median"] / flt["median"] > 2  # slower, beyond 2x
    assert old.findings.variant("fiq").latency_vs_float == 2
    for fmt, gold in (("html", "report.html"), ("md", "summary.md")):
        assert _scrub(render.render(old, fmt).decode("utf-8")) == (GOLD / gold).read_text(encoding="utf-8")


def test_render_command_works_without_tensorflow(tmp_path):
    """`quant-report render` in a process where importing TensorFlow fails; Markdown loads neither
    matplotlib nor WeasyPrint."""
    code = (
        "import sys; sys.modules['tensorflow'] = None; sys.modules['keras'] = None\n"
        "from reporter.cli import main\n"
        f"rc = main(['render', {str(FIXTURE)!r}, '--format', 'md', '--out', {str(tmp_path / 's.md')!r}])\n"
        "assert 'sklearn' not in sys.modules\n"
        "assert 'matplotlib' not in sys.modules and 'weasyprint' not in sys.modules  # only for html/pdf\n"
        "sys.exit(rc)\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "s.md").read_text().startswith("## Quantization report")


@pytest.mark.parametrize("content,needle", [(None, "no such file"), ("{nope", "not a JSON file"),
                                            ('{"schema_version": 99}', "schema_version")])
def test_render_command_bad_input(tmp_path, capsys, content, needle):
    from reporter.cli import main

    src = tmp_path / "report.json"
    if content is not None:
        src.write_text(content)
    assert main(["render", str(src), "--format", "html"]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and str(src) in err[0] and needle in err[0]
    assert not (tmp_path / "report.html").exists()


def test_a_failing_format_does_not_lose_the_others(report, tmp_path, monkeypatch):
    def broken_pdf(*args, **kwargs):
        raise RuntimeError("no pango today")

    monkeypatch.setattr(render, "render_pdf", broken_pdf)
    written, errors = render.write_reports(report, tmp_path)
    assert errors == {"pdf": "RuntimeError: no pango today"}
    assert sorted(p.name for p in written) == ["report.html", "report.json", "summary.md"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["report.html", "report.json", "summary.md"]


def test_the_pdf_is_printed_from_a_page_without_what_print_hides(report):
    """The page the PDF is made from leaves out what print hides anyway (the full layer table of a model with more
    layers than the top ones shown, the Analyzer's text): the PDF is byte for byte the one WeasyPrint makes from the
    whole report.html."""
    import dataclasses

    layers = [dataclasses.replace(layer, index=k * len(report.layers) + layer.index,
                                  tensor_name=f"{layer.tensor_name}_{k}")
              for k in range(8) for layer in report.layers]
    many = dataclasses.replace(report, layers=layers)
    images = render.charts(many)
    full, printed = render.render_html(many, images).decode(), render.render_html(many, images, printed=True).decode()
    assert 'id="all-layers"' in full and 'id="all-layers"' not in printed
    assert 'class="appendix-analyzer"' in full and 'class="appendix-analyzer"' not in printed
    # the same break opportunities in names: as zero-width spaces instead of <wbr> elements (WeasyPrint's layout
    # ignores <wbr>, and styles each one)
    assert "<wbr>" not in printed and render.PRINTED_BREAK in printed and "<wbr>" in full
    as_text = full.replace("<wbr>", render.PRINTED_BREAK).encode()
    assert render.render_pdf(many, printed.encode()) == render.render_pdf(many, as_text)


def test_printed_names_wrap_after_their_separators(report):
    """A long tensor name in the PDF's layer table wraps only after '/', '_' or ';' (read from WeasyPrint's own
    layout of the printed page), never in the middle of a word."""
    import dataclasses

    import weasyprint
    from weasyprint.formatting_structure import boxes

    name = "model/" + "/".join(f"block{k}conv" for k in range(9)) + "/BiasAdd"
    layers = [dataclasses.replace(report.layers[0], tensor_name=name)] + list(report.layers[1:])
    page = render.render_html(dataclasses.replace(report, layers=layers), {c: "" for c in render.CHARTS},
                              printed=True).decode()
    document = weasyprint.HTML(string=page, url_fetcher=render.DataOnlyFetcher(), base_url=None).render()
    lines = []
    for p in document.pages:
        for box in p._page_box.descendants():
            if isinstance(box, boxes.LineBox):
                text = "".join(b.text for b in box.descendants() if isinstance(b, boxes.TextBox))
                if "block" in text and "conv" in text:
                    lines.append(text.replace(render.PRINTED_BREAK, ""))
    broken = [t for t in lines if not t.endswith("BiasAdd")]
    assert broken, f"the name was expected to wrap: {lines}"
    assert all(t[-1] in "/_;" for t in broken), lines


@pytest.mark.parametrize("process", ["side", "contained"])
def test_charts_drawn_by_the_side_process_are_the_ones_drawn_here(report, process):
    """The run's side process (a big model's) or its contained child (a small model's, idle once the measuring is
    done) draws some charts while the run draws the others: every chart is the PNG drawn here, byte for byte (the
    report is the same, reproducible whichever process drew it)."""
    from reporter.convert import contained
    from reporter.convert.side import SideConverter

    class Watched:  # the helper, its jobs kept: each must have drawn, not failed into a local drawing
        def __init__(self, owner, side):
            self.owner, self.side, self.jobs = owner, side, []

        def call(self, fn, *args):
            self.jobs.append(self.side.call(fn, *args))
            return self.jobs[-1]

    owner = SideConverter() if process == "side" else contained.Child()
    helper = Watched(owner, owner if process == "side" else owner.helper())
    try:
        beside = render.charts(report, helper)
    finally:
        owner.close()
    taken = [job for job in helper.jobs if not job.cancelled()]  # those the helper drew, not taken back
    assert len(helper.jobs) == len(render.CHARTS) and taken and all(job.exception() is None for job in taken)
    here = render.charts(report)
    assert all(here[name].startswith("data:image/png;base64,") for name in render.CHARTS if here[name])
    assert beside == here


def test_charts_drawn_ahead_are_taken_only_while_the_report_still_plans_them_so(report, monkeypatch):
    """The run has a helper process draw the per-layer charts and the confusion matrices once the search has chosen,
    while it measures the alternatives: the report takes those drawings (not drawn again) when it plans its charts
    the same way, and draws again any planned with other layers kept in float or other matrices (a stale chart is
    never shown)."""
    from concurrent.futures import ThreadPoolExecutor

    from reporter.render.layer_plan import LayerFacts

    class Pool:  # a helper: call(fn, *args) gives a Future
        def __init__(self):
            self.pool = ThreadPoolExecutor(1)

        def call(self, fn, *args):
            return self.pool.submit(fn, *args)

    here = render.charts(report)
    facts = LayerFacts.of(report)
    plans = render.chart_plans(report)
    assert report.layers and set(plans) == {"confusion", "ranges", "rmse"}
    ahead = render.draw_ahead(plans, Pool())
    for _, job in ahead.values():
        job.result()  # drawn before the report is done
    drawn_here = []
    draw = render.draw_chart
    monkeypatch.setattr(render, "draw_chart", lambda name, r: drawn_here.append(name) or draw(name, r))
    assert render.charts(report, None, ahead) == here
    assert drawn_here == ["tradeoff"]

    stale = render.draw_ahead(render.layer_plans(dataclasses.replace(
        facts, kept=facts.kept ^ {report.layers[0].tensor_name})), Pool())
    assert all(job.result() != here[name] for name, (_, job) in stale.items())  # other layers marked as kept
    drawn_here.clear()
    assert render.charts(report, None, stale) == here
    assert sorted(drawn_here) == ["confusion", "ranges", "rmse", "tradeoff"]
    # the confusion matrices planned before a variant that changes them was measured: drawn again
    changed = dataclasses.replace(report, variants=[dataclasses.replace(v, metrics=dataclasses.replace(
        v.metrics, confusion_matrix=[row[::-1] for row in v.metrics.confusion_matrix]))
        if v.metrics and v.metrics.confusion_matrix else v for v in report.variants])
    early = render.draw_ahead({"confusion": render.chart_plans(changed)["confusion"]}, Pool())
    assert early["confusion"][1].result() != here["confusion"]
    drawn_here.clear()
    assert render.charts(report, None, early)["confusion"] == here["confusion"]
    assert "confusion" in drawn_here


def test_the_pdf_laid_out_by_the_runs_helper_process_is_the_one_laid_out_here(report, tmp_path):
    """A run has its contained child (or side process) lay out the PDF while it writes the other formats: the file
    is the one laid out in this process, byte for byte; when the helper fails, the PDF is laid out here instead (and
    run.log says why, not the terminal)."""
    from concurrent.futures import Future

    from reporter.convert import contained

    images = render.charts(report)
    child, jobs = contained.Child(), []

    class Watched:  # the child's helper, its jobs kept: the PDF must come from it, not from a local fallback
        def __init__(self, helper):
            self.helper = helper

        def call(self, fn, *args):
            jobs.append(self.helper.call(fn, *args))
            return jobs[-1]

    try:
        (tmp_path / "beside").mkdir()
        written, errors = render.write_reports(report, tmp_path / "beside", ("json", "pdf"), images,
                                               Watched(child.helper()))
    finally:
        child.close()
    assert not errors and len(jobs) == 1 and jobs[0].exception() is None
    (tmp_path / "here").mkdir()
    render.write_reports(report, tmp_path / "here", ("json", "pdf"), images)
    laid_out_here = (tmp_path / "here" / "report.pdf").read_bytes()
    assert laid_out_here.startswith(b"%PDF") and (tmp_path / "beside" / "report.pdf").read_bytes() == laid_out_here

    class Gone:  # a helper whose process died
        def call(self, fn, *args):
            failed = Future()
            failed.set_exception(RuntimeError("the helper died"))
            return failed

    (tmp_path / "gone").mkdir()
    written, errors = render.write_reports(report, tmp_path / "gone", ("json", "pdf"), images, Gone())
    assert not errors and (tmp_path / "gone" / "report.pdf").read_bytes() == laid_out_here
    assert "the helper process failed (RuntimeError: the helper died)" in (tmp_path / "gone" / "run.log").read_text()
