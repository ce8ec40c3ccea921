"""Work the run hands its other processes: the side process (reporter.convert.side) and the contained child
(reporter.convert.contained). What they do once the debugger's views are queued there, the charts they share, and the
timing lock that keeps them quiet while a latency is timed."""

from __future__ import annotations

import traceback
from typing import Callable, Optional

from reporter.convert import contained, litert
from reporter.core import children, variants
from reporter.model.report import Report
from reporter.pipeline.context import RunContext
from reporter.render import formats as render
from reporter.render.layer_plan import LayerFacts, confusion_plan


def charts(report: Report, formats, helper, ahead: dict) -> Optional[dict]:
    """The charts of the HTML and the PDF, some drawn by `helper` (the side process) meanwhile, those drawn ahead
    (`ahead`, from `draw_ahead`) taken when the report shows them as planned there; None when no format shows them or
    they could not be drawn (the render then says why, per format)."""
    if not {"html", "pdf"} & set(formats):
        return None
    try:
        return render.charts(report, helper, ahead)
    except Exception:  # noqa: BLE001 - said by the render, format by format, where the measured report is kept
        traceback.print_exc()
        return None


def quiet_lock(side_conv, outer, background: contained.Background):
    """The timing lock: the batch's (one model timed at a time across workers), and no conversion running on
    the side, nor work in the background, while a latency is timed."""
    return _QuietLock(side_conv, outer, background)


class _QuietLock:
    """Re-entered for every timing: waits for the side conversions and the background work, then holds `outer` if
    there is one."""

    def __init__(self, side_conv, outer, background: contained.Background):
        self.side_conv, self.outer, self.background = side_conv, outer, background

    def __enter__(self):
        if self.side_conv is not None:
            self.side_conv.wait()
        self.background.wait()
        if self.outer is not None:
            self.outer.__enter__()
        return self

    def __exit__(self, *exc):
        return self.outer.__exit__(*exc) if self.outer is not None else False


def after_the_debuggers_views(ctx: RunContext):
    """What the helper processes do once the debugger's views are queued there: the contained child calibrates
    LiteRT Quantizer at the lowest priority (it takes what the search leaves of the cores; the side process when the
    child is gone), and the process that shares the charts imports matplotlib (and WeasyPrint, for the PDF it lays
    out), so that its first chart starts at once when the report is done."""
    child = getattr(ctx.quantizer, "child", None)
    if child is not None and ctx.background is not None and not ctx.litert_models.has_calibration() and \
            not ctx.litert_models.collected_elsewhere():
        pending = child.submit(contained.LITERT_CALIBRATION, contained.behind, litert.collect_calibration,
                               ctx.float_model, ctx.data.x_calib)
        ctx.background.add(pending)
        ctx.litert_models.collect_from(children.or_none(pending))
    else:
        side_litert_calibration(ctx)
    if {"html", "pdf"} & set(ctx.settings.formats):
        helper = ctx.side or (child.helper() if child is not None else None)
        if helper is not None:
            helper.call(render.warm_charts)  # its failure is the charts' own to say, where they are drawn
            if "pdf" in ctx.settings.formats:
                helper.call(render.warm_pdf)  # it lays out the PDF (render.formats.write_reports)


def draw_ahead(ctx: RunContext, results: dict) -> Optional[Callable]:
    """What the search tells once the recommended model is measured (recommendation.Asked's `chosen`): the charts
    that are decided by then are planned (the per-layer ones, and the confusion matrices of the variants in `results`
    and that model) and handed to the helper process (the side process, else the contained child), which draws them
    while this one measures the recommendation's alternatives (and climbs the repair ladder); they land in
    `ctx.charts_ahead`, and the report takes each it still plans the same way. None when no format shows charts."""
    if not {"html", "pdf"} & set(ctx.settings.formats):
        return None

    def start(layers: list, kept: list, threshold: float, selective) -> None:
        found = helper(ctx)
        if found is None:
            return
        try:
            confusion = confusion_plan([results[name] for name in variants.ordered(results)], selective)
            plans = {"confusion": confusion} if confusion is not None else {}  # the slowest to draw, first
            plans.update(render.layer_plans(LayerFacts(tuple(layers), frozenset(kept), threshold)))
            ctx.charts_ahead.update(render.draw_ahead(plans, found))
        except Exception:  # noqa: BLE001 - the charts are drawn when the report is done instead
            traceback.print_exc()
    return start


def helper(ctx: RunContext):
    """The process that takes some of this one's work (the search's next candidates, the repair ladder's range methods):
    the side process, else the contained child; None after the child crashed."""
    child = getattr(ctx.quantizer, "child", None)
    return ctx.side or (child.helper() if child is not None else None)


def behind(ctx: RunContext):
    """The contained child as a process for work started ahead of its turn (a repair rung's calibration): each call
    at the lowest priority (contained.behind), and no latency timed while it runs; None without a child."""
    child = getattr(ctx.quantizer, "child", None)
    found = child.helper() if child is not None else None
    return _Behind(found, ctx.background) if found is not None and ctx.background is not None else None


class _Behind:
    def __init__(self, helper_, background: contained.Background):
        self._helper, self._background = helper_, background

    def call(self, fn: Callable, *args):
        job = self._helper.call(contained.behind, fn, *args)
        self._background.add(job.result)
        return job


def side_litert_calibration(ctx: RunContext):
    """LiteRT Quantizer's calibration started in the side process (once), for the search's LiteRT models: after
    every latency of the measure stage (a latency waits for the side process to be done: a blamed DRQ's fix waited
    2 s for it) and behind the debugger's view there (2.5 s on EfficientNet-B0: the view would wait for it)."""
    if ctx.side is not None and not ctx.litert_models.has_calibration() and \
            not ctx.litert_models.collected_elsewhere():
        ctx.side.submit_calibration(ctx.float_model, ctx.data.x_calib)
