"""Rendering: report.json into HTML, PDF, Markdown and JSON, through the Jinja templates.

Nothing here imports TensorFlow, so `quant-report render report.json` works without it.
"""

from __future__ import annotations

import os
import re
import traceback
from pathlib import Path
from typing import Callable, Optional

import jinja2
import markupsafe

from reporter.core import heap
from reporter.core.formatting import shorten
from reporter.model.report import Report
from reporter.core.files import write_atomic  # noqa: F401 - the renderers' writes; cli and index use it from here
from reporter.render import FILE_NAMES, FORMATS
from reporter.render.layer_plan import ConfusionPlan, LayerFacts, confusion_plan, layer_plans
from reporter.render.view import ReportView

ANALYZER_MAX_LINES = 400  # per variant in the appendix; the full text is in analyzer_<variant>.txt


def templates_dir() -> Path:
    """The templates: inside the installed package (reporter/templates/), or the repository's top-level
    templates/."""
    packaged = Path(__file__).resolve().parents[1] / "templates"
    if packaged.is_dir():
        return packaged
    return Path(__file__).resolve().parents[2] / "templates"


def environment(autoescape: bool) -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(templates_dir())),
        autoescape=autoescape,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
    )
    env.filters["md"] = md_cell
    env.filters["thousands"] = lambda n: f"{n:,}"
    env.filters["truncate_lines"] = truncate_lines
    env.filters["breakable"] = breakable
    env.filters["tensor_name"] = tensor_name
    env.filters["titled_names"] = titled_names
    env.filters["md_code"] = md_code
    return env


def markdown_environment() -> jinja2.Environment:
    """The environment of summary.md and diff.md: like `environment(False)`, and every value a template prints
    is escaped as Markdown text (`md_cell`) unless a Markdown filter (`md`, `md_code`) already made it so, so
    no field of a report.json can carry raw HTML, a link or an image into them."""
    env = environment(False)
    env.finalize = _md_finalize
    return env


class MdText(str):
    """Text already escaped for Markdown (by `md_cell` or `md_code`): printed as it is."""


def _md_finalize(value):
    return value if isinstance(value, MdText) else md_cell("" if value is None else value)


BREAK_AFTER = re.compile(r"([/;_])")
PRINTED_BREAK = "\u200b"  # a zero-width space: where <wbr> lets a name wrap, in the page the PDF is printed from
TENSOR_NAME_LIMIT = 60  # longer tensor names are shortened in the middle in tables


def breakable(value) -> markupsafe.Markup:
    """Escaped text that may wrap only after '/', ';' or '_' (op and tensor names never break mid-word)."""
    pieces = BREAK_AFTER.split(str(value))  # text, separator, text, ...
    out = []
    for i, piece in enumerate(pieces):
        out.append(str(markupsafe.escape(piece)))
        if i % 2 == 1:
            out.append("<wbr>")
    return markupsafe.Markup("".join(out))


def tensor_name(value, limit: int = TENSOR_NAME_LIMIT) -> markupsafe.Markup:
    """A tensor name for a table cell: shortened in the middle when long, the full name on hover."""
    text = str(value)
    short = shorten(text, limit)
    if short == text:
        return breakable(text)
    return markupsafe.Markup('<span title="{}">{}</span>').format(text, breakable(short))


def titled_names(pieces) -> markupsafe.Markup:
    """Text cut by LayersView.name_pieces, escaped: each shortened name in a <span> whose title is its full name (a
    name cut with "…" cannot be searched for in Netron or Model Explorer), the rest as it is."""
    return markupsafe.Markup("").join(
        markupsafe.Markup('<span title="{}">{}</span>').format(full, breakable(piece)) if full else breakable(piece)
        for piece, full in pieces)


def _no_controls(text: str) -> str:
    """Line breaks and other control characters (escape sequences) as spaces: a cell stays one line."""
    return text if text.isprintable() else "".join(ch if ch.isprintable() else " " for ch in text)


def md_code(value, limit: int = 48) -> str:
    """A name as a Markdown code span (shortened in the middle when long): no escaping needed inside,
    except the pipe, which GitHub's tables split on."""
    text = shorten(_no_controls(str(value)), limit).replace("|", "\\|")
    fence = "``" if "`" in text else "`"
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    return MdText(f"{fence}{pad}{text}{pad}{fence}")


def md_cell(value) -> str:
    """Text safe inside a Markdown table cell: no pipes, no line breaks, no raw HTML, no entities
    (Markdown's backslash escapes keep '<', '>' and '&' literal)."""
    text = _no_controls(str(value)).replace("\\", "\\\\").replace("|", "\\|")
    for ch in "<>&`*[]":
        text = text.replace(ch, "\\" + ch)
    # An underscore inside a word never starts emphasis (tensor_name stays readable); at a word's
    # edge it could.
    text = re.sub(r"(?<![A-Za-z0-9])_|_(?![A-Za-z0-9])", r"\\_", text)
    # What would make a line a heading, a list item or a rule when the text starts one.
    return MdText(_MD_LINE_START.sub(r"\1\2\\\3", text, count=1))


# A heading's '#', a list's or a rule's '-', '+' or '=', an ordered list's '1.': escaped as '\#', '1\.'
_MD_LINE_START = re.compile(r"^(\s*)(\d{0,9})(#|[-+=](?=\s|[-=]*$)|(?<=\d)[.)](?=\s|$))")


def truncate_lines(text: str, limit: int = ANALYZER_MAX_LINES) -> str:
    lines = text.splitlines()
    if len(lines) <= limit:
        return text
    return "\n".join(lines[:limit]) + f"\n… {len(lines) - limit} more lines in the analyzer_*.txt file"


CHARTS = ("confusion", "ranges", "rmse", "tradeoff")
def charts(report: Report, helper=None, ahead: Optional[dict] = None) -> dict[str, str]:
    """The report's charts as data: URIs (drawn once for the HTML and the PDF). `helper`: another process whose
    `call(fn, *args)` gives a Future (the run's side process or contained child; None: all drawn here) shares the
    drawing: every chart is handed to it in order, and this process draws from the last one back, taking each the
    helper has not started (its Future cancelled), so that neither waits on the other whatever each chart costs. The
    same bytes either way (one matplotlib, one report); one the helper fails to draw is drawn here. `ahead`: the
    charts a helper started before the report was done (`draw_ahead`: the per-layer ones, the confusion matrices);
    each whose plan is the report's is taken as drawn there, the others are drawn now."""
    from reporter.core.children import shared

    taken = _taken(report, ahead or {})
    names = [name for name in CHARTS if name not in taken]
    drawn = shared(len(names), (lambda k: helper.call(draw_chart, names[k], report)) if helper is not None else None,
                   lambda k: draw_chart(names[k], report))
    found = dict(zip(names, drawn))
    for name, job in taken.items():
        try:
            found[name] = job.result()
        except Exception:  # noqa: BLE001 - drawn here instead (its traceback in run.log)
            traceback.print_exc()
            found[name] = draw_chart(name, report)
    return {name: found[name] for name in CHARTS}


def chart_plans(report: Report) -> dict:
    """The plans of the charts drawn from a plan (reporter.render.layer_plan): the per-layer ones and, for a
    classification, the confusion matrices; name -> plan."""
    plans = dict(layer_plans(LayerFacts.of(report)))
    if ReportView(report).is_classification:
        found = confusion_plan(report.variants, report.recommendation.selective if report.recommendation else None)
        if found is not None:
            plans["confusion"] = found
    return plans


def draw_ahead(plans: dict, helper) -> dict:
    """Charts of a report not yet done, planned from what they read of it (known once the search has chosen),
    started in `helper` (`call(fn, *args)` gives a Future): {name: (plan, Future)}, for `charts`' `ahead`."""
    return {name: (plan, helper.call(draw_planned, plan)) for name, plan in plans.items()}


def _taken(report: Report, ahead: dict) -> dict:
    """The charts drawn ahead that the report shows as they were planned, and started (or done) by the helper: name ->
    Future. The rest are cancelled where the helper has not started them."""
    plans = chart_plans(report) if ahead else {}
    taken = {}
    for name, (plan, job) in ahead.items():
        if plans.get(name) == plan and not job.cancel():
            taken[name] = job
        else:
            job.cancel()
    return taken


def draw_planned(plan) -> str:
    """A chart drawn from its plan (reporter.render.layer_plan: a per-layer chart's or the confusion matrices'), as a
    data: URI."""
    from reporter.render import plots  # matplotlib only when a chart is drawn

    return plots.confusion_chart(plan) if isinstance(plan, ConfusionPlan) else plots.layer_chart(plan)


def warm_charts() -> None:
    """Imports what drawing the charts needs (matplotlib, 0.3 s): run by a helper process while it would idle, so
    that its share of `charts` starts at once."""
    from reporter.render import plots  # noqa: F401 - the import is the point


def draw_chart(name: str, report: Report) -> str:
    """One of the report's CHARTS as a data: URI ("" when the report has nothing for it)."""
    from reporter.render import plots  # matplotlib (0.3 s to import) only when a format needs the charts

    if (name == "confusion" and not ReportView(report).is_classification) or \
            (name in ("ranges", "rmse") and not report.layers):
        return ""
    draw = {"confusion": plots.confusion_matrices, "ranges": plots.layer_ranges, "rmse": plots.layer_rmse,
            "tradeoff": plots.tradeoff}[name]
    return draw(report)


def render_html(report: Report, images: Optional[dict] = None, printed: bool = False) -> bytes:
    """report.html; `printed`: the page the PDF is made from, without what print hides anyway (every layer's
    table, the Analyzer's text: WeasyPrint would still style each of their thousands of cells, a second of a
    300-layer model's PDF)."""
    view = ReportView(report)
    images = charts(report) if images is None else images
    # Our own stylesheet, not data: it must not be escaped (quotes and '>' are CSS syntax).
    css = markupsafe.Markup((templates_dir() / "report.css").read_text(encoding="utf-8"))
    html = environment(True).get_template("report.html.j2").render(v=view, r=report, img=images, css=css,
                                                                   printed=printed)
    if printed:  # the same break opportunities as text: WeasyPrint styles and lays out each <wbr> as an element
        html = html.replace("<wbr>", PRINTED_BREAK)  # (0.25 s of a 150-layer model's PDF); a name's own "<wbr>"
    return html.encode("utf-8")  # is escaped, so only breakable()'s are replaced


def render_notebook(report: Report) -> str:
    """Jupyter's inline view (reporter.api.Report._repr_html_): the story panel and the model to ship, escaped,
    with no script and nothing fetched."""
    view = ReportView(report)
    folder = getattr(report, "folder", None)
    return environment(True).get_template("notebook.html.j2").render(v=view, r=report, folder=folder or "")


def render_md(report: Report) -> bytes:
    view = ReportView(report)
    return markdown_environment().get_template("summary.md.j2").render(v=view, r=report).encode("utf-8")


def render_json(report: Report) -> bytes:
    return report.to_json().encode("utf-8")


def render_pdf(report: Report, html: bytes = None) -> bytes:
    """The HTML report through WeasyPrint, which may fetch nothing but data: URIs."""
    import logging

    import weasyprint

    logging.getLogger("weasyprint").setLevel(logging.ERROR)
    logging.getLogger("fontTools").setLevel(logging.ERROR)
    html = html if html is not None else render_html(report, printed=True)
    document = weasyprint.HTML(string=html.decode("utf-8"), url_fetcher=DataOnlyFetcher(), base_url=None)
    # fontTools stamps the embedded font subsets with the current time unless SOURCE_DATE_EPOCH is set.
    saved = os.environ.get("SOURCE_DATE_EPOCH")
    os.environ["SOURCE_DATE_EPOCH"] = "0"
    try:
        with heap.paused():  # the layout's boxes are freed by the next collection, not walked during it
            return document.write_pdf(pdf_identifier=b"quant-report")
    finally:
        if saved is None:
            del os.environ["SOURCE_DATE_EPOCH"]
        else:
            os.environ["SOURCE_DATE_EPOCH"] = saved


def printed_pdf(report: Report, images: dict) -> bytes:
    """The PDF of `report` with its charts (`images`): its printed page laid out by WeasyPrint (`render_pdf`)."""
    return render_pdf(report, render_html(report, images, printed=True))


def _pdf(laid_out, report: Report, images: dict, folder: Path) -> bytes:
    """The PDF the helper laid out (`laid_out`, a Future; None: none), else laid out here (its error, if any, is
    the format's own)."""
    if laid_out is not None:
        try:
            return bytes(laid_out.result())
        except Exception as exc:  # noqa: BLE001 - laid out here instead
            _logged(folder, exc)
    return printed_pdf(report, images)


def _logged(folder: Path, exc: Exception) -> None:
    """The helper process's failure to lay out the PDF, said in the run's log (the terminal is the user's)."""
    with open(Path(folder) / "run.log", "a", encoding="utf-8") as log:
        log.write(f"quant-report: the PDF is laid out here: the helper process failed ({type(exc).__name__}:"
                  f" {str(exc).strip()[:300]})\n")


def warm_pdf() -> None:
    """Imports WeasyPrint (0.5 s): run by the helper process that will lay out the PDF, while it would idle."""
    import weasyprint  # noqa: F401 - the import is the point


def _data_only_fetcher_class():
    from weasyprint.urls import URLFetcher

    class _DataOnlyFetcher(URLFetcher):
        """Refuses every URL that is not a data: URI, so a report can read no file and no network."""

        def __init__(self):
            super().__init__(allowed_protocols={"data"}, allow_redirects=False)
            self.refused = []

        def fetch(self, url, headers=None):
            if not url.lower().startswith("data:"):
                self.refused.append(url)
                raise ValueError(f"quant-report refuses to fetch {url[:80]!r}: only data: URIs are allowed")
            return super().fetch(url, headers)

    return _DataOnlyFetcher


def DataOnlyFetcher():  # noqa: N802 - reads like the class it builds
    return _data_only_fetcher_class()()


RENDERERS: dict[str, Callable[[Report], bytes]] = {
    "html": render_html,
    "pdf": render_pdf,
    "md": render_md,
    "json": render_json,
}


def render(report: Report, fmt: str) -> bytes:
    if fmt not in RENDERERS:
        raise ValueError(f"unknown format {fmt!r}: choose from {', '.join(FORMATS)}")
    return RENDERERS[fmt](report)


def write_reports(report: Report, folder: Path, formats=FORMATS, images: Optional[dict] = None,
                  helper=None) -> tuple[list[Path], dict[str, str]]:
    """Renders `report` into each format inside `folder`; returns the files written and the errors.

    JSON goes first and a format that fails to render does not stop the others, so the measured
    result is never lost to a rendering problem. The charts are drawn once for both HTML and PDF (`images`:
    drawn already, by `charts`). `helper`: another process whose `call(fn, *args)` gives a Future (the run's side
    process or contained child) lays out the PDF while this one renders the other formats (the same bytes: one
    WeasyPrint, one report); a PDF it fails to make is made here.
    """
    written, errors = [], {}
    laid_out = None
    if "pdf" in formats and images is not None and helper is not None:
        try:
            laid_out = helper.call(printed_pdf, report, images)
        except Exception as exc:  # noqa: BLE001 - the helper is gone: laid out here
            _logged(folder, exc)
    for fmt in ("json", "md", "html", "pdf"):
        if fmt not in formats:
            continue
        try:
            if fmt in ("html", "pdf") and images is None:
                images = charts(report)
            data = render_html(report, images) if fmt == "html" else \
                _pdf(laid_out, report, images, folder) if fmt == "pdf" else render(report, fmt)
        except Exception as exc:  # noqa: BLE001 - reported per format; the other formats go on
            errors[fmt] = f"{type(exc).__name__}: {str(exc).strip().splitlines()[0] if str(exc).strip() else ''}"
            continue
        path = Path(folder) / FILE_NAMES[fmt]
        write_atomic(path, data)
        written.append(path)
    return sorted(written, key=lambda p: [FILE_NAMES[f] for f in FORMATS].index(p.name)), errors
