"""The integer-only repair ladder (issue 45): for an integer-only target (int8, micro, ethos-u*) on which no
integer-only model meets the accuracy target, each rung reporter.convert.rungs builds (cheapest first) is measured
like every model (on the evaluation data, then on the target's kernels and tool: reporter.pipeline.on_target) and
becomes an option of the decision; the ladder stops at the first rung whose model meets the target (the one rule,
read from the decision's judged options). Every rung's outcome is kept in `Report.repairs`."""

from __future__ import annotations

import dataclasses
import time
import traceback
from typing import Optional

import numpy as np

from reporter.core import targets, variants
from reporter.core.errors import one_line
from reporter.findings import decision as choice
from reporter.measure.measurer import Measurer
from reporter.model import repair as rp
from reporter.model.data import Inputs
from reporter.measure import runtime
from reporter.model.report import Report, VariantResult
from reporter.findings import rule as rl
from reporter.pipeline import beside, conclude, on_target
from reporter.pipeline.context import RunContext
from reporter.search import recommend


def needed(report: Report) -> bool:
    """The run's target is integer-only hardware and no quantized model that runs there meets the accuracy target."""
    target = targets.of(report.settings.target)
    if not target.integer_hardware:
        return False
    found = choice.meets_on_target(report)
    return found is not None and not found.meets


def climb(ctx: RunContext, m: Measurer, report: Report) -> Report:
    """`report` with the ladder's rungs measured, up to the first whose model meets the accuracy target there."""
    if not needed(report):
        return report
    try:
        return _climb(ctx, m, report)
    except Exception as exc:  # noqa: BLE001 - the ladder adds options; its failure must not lose the report
        traceback.print_exc()
        ctx.progress.say(f"the repair ladder failed: {one_line(exc)}")
        return dataclasses.replace(report, repairs=[*report.repairs, rp.RepairRung(
            "ladder", "The integer-only repair ladder", rp.FAILED, error=one_line(exc))])


def _climb(ctx: RunContext, m: Measurer, report: Report) -> Report:
    sel = recommend.selection(ctx.data, ctx.settings.calibration_samples, ctx.settings.selection_samples,
                              m.task.classification)
    found: list[rp.RepairRung] = []
    stopped = False
    screening = Screening(ctx.float_model, sel.x, conclude.target_rule(ctx.settings, m).screen())
    for name, option in choice.judged_on_target(report):  # the run's models that run on the target and miss: the floor
        path = ctx.folder / f"{name}.tflite"
        if option.runs and not option.meets and path.is_file():
            screening.seed(name, path.read_bytes())
    t0 = time.perf_counter()
    with ctx.progress.stage("repair", detail="integer-only ladder"):
        for candidate in _candidates(ctx, report, sel.x):
            screen = screening.check(candidate)
            if screen is not None:  # no closer to float than a rung that missed: not measured further
                found.append(rp.RepairRung(candidate.rung, candidate.label, rp.SCREENED, detail=candidate.detail,
                                           seconds=candidate.seconds, input_transform=candidate.input_transform,
                                           screen=screen))
                report = dataclasses.replace(report, repairs=list(found))
                ctx.progress.say(f"repair {candidate.rung}: agrees with float on {screen.words} of {screen.samples:,}"
                                 f" selection samples, no closer than {screen.against} ({screen.against_agreement:.1%}),"
                                 " which misses: not measured further")
                continue
            rung = _measured(ctx, m, candidate)
            found.append(rung)
            report = dataclasses.replace(report, repairs=list(found))
            if rung.model is not None:
                option = _option(report, rung.model.name)
                met = option is not None and option.meets and option.runs
                found[-1] = dataclasses.replace(rung, status=rp.MEETS if met else (
                    rp.MISSES if option is None or option.runs else rp.NOT_ON_TARGET))
                report = dataclasses.replace(report, repairs=list(found))
                stopped = met
                if found[-1].status == rp.MISSES:
                    screening.missed(candidate)
            ctx.progress.say(f"repair {candidate.rung}: {found[-1].status.replace('_', ' ')}"
                             + (f" ({found[-1].error})" if found[-1].error else ""))
            if stopped:  # the rungs after it are listed, never built
                tried = {r.rung for r in found}
                found += [rp.RepairRung(name, label, rp.NOT_TRIED) for name, label in _plan(report)
                          if name not in tried]
                report = dataclasses.replace(report, repairs=list(found))
                break
    seconds = time.perf_counter() - t0
    tried = sum(r.model is not None for r in found)
    ctx.progress.say(f"integer-only repair ladder: {tried} rung{'s' if tried != 1 else ''} built and measured"
                     f" ({seconds:.1f} s)")
    return dataclasses.replace(report, timings_s={**report.timings_s, "repair": round(seconds, 3)})


class Screening:
    """The ladder's rungs measured on the selection samples first: a rung's model goes on to the evaluation data and
    the target only when it agrees with float there better beyond noise than the best rung measured to miss the
    target (`screen`, the findings' acceptance: reporter.findings.rule.Acceptance.accepts); the first rung built is
    always measured."""

    def __init__(self, float_model: bytes, x_select, screen: rl.Acceptance):
        self.float_model = float_model
        self.screen = screen
        self.x = runtime.keyed(x_select, runtime.signature_names(float_model)[1]) if x_select is not None and \
            len(x_select) else None
        self._reference: Optional[tuple[dict, dict]] = None
        self._seen: dict[str, np.ndarray] = {}
        self.floor: Optional[tuple[str, np.ndarray]] = None  # (rung, each sample's agreement) of the best that missed

    def agreement(self, candidate) -> np.ndarray:
        """Each selection sample's agreement with float of the candidate's model (its input transform applied)."""
        from reporter.convert.rungs.base import class_scores, per_sample_agreement

        if candidate.rung not in self._seen:
            if self._reference is None:
                self._reference = (runtime.outputs(self.float_model, self.x), class_scores(self.float_model))
            x = candidate.input_transform.apply(self.x) if candidate.input_transform is not None else self.x
            reference, kinds = self._reference
            self._seen[candidate.rung] = per_sample_agreement(reference, runtime.outputs(candidate.model, x), kinds)
        return self._seen[candidate.rung]

    def check(self, candidate) -> Optional[rp.Screen]:
        """None to measure the candidate on the evaluation data and the target; else what screened it out."""
        if candidate.model is None or self.x is None or self.floor is None:
            return None
        mine, (against, floor) = self.agreement(candidate), self.floor
        if self.screen.accepts(mine, floor):
            return None
        from reporter.convert.rungs.base import class_scores, figure

        kinds = class_scores(self.float_model)
        return rp.Screen(len(mine), float(np.mean(mine)), against, float(np.mean(floor)),
                         figure(float(np.mean(mine)), kinds))

    def missed(self, candidate) -> None:
        """The candidate was measured and missed the target: the floor the next rungs must beat."""
        if candidate.model is not None and self.x is not None:
            self._lower(candidate.rung, self.agreement(candidate))

    def seed(self, name: str, model: bytes) -> None:
        """A model of the run (`name`, a variant) that runs on the target and misses the accuracy target there."""
        if self.x is not None:
            self._lower(name, self.agreement(_Built(name, model)))

    def _lower(self, name: str, mine: np.ndarray) -> None:
        if self.floor is None or np.mean(mine) > np.mean(self.floor[1]):
            self.floor = (name, mine)


@dataclasses.dataclass(frozen=True)
class _Built:
    """A model the screening measures that is not a rung's candidate (a variant of the run)."""

    rung: str
    model: bytes
    input_transform: None = None


def _plan(report: Report) -> list[tuple[str, str]]:
    """Every rung of the ladder for this run's target, (code, label), in the order they are tried."""
    from reporter.convert import rungs

    return [(rung.code, rung.label) for rung in rungs.plan(targets.of(report.settings.target))]


def _candidates(ctx: RunContext, report: Report, x_select):
    """The ladder's rungs (reporter.convert.rungs.REGISTRY), cheapest first, each built when asked for; 16x8 builds
    the run's own variant (where the run measured it already, it says so)."""
    from reporter.convert import rungs

    measured = frozenset(v.name for v in report.variants)  # the run's own 16x8 is not built again
    yield from rungs.candidates(ctx.float_model, ctx.data.x_calib, x_select, target=targets.of(report.settings.target),
                                run=rungs.RunVariants(measured, ctx.litert_models.build,
                                                      lambda: ctx.litert_models.quantizer().calibration(),
                                                      beside.helper(ctx), beside.behind(ctx)))


def _option(report: Report, name: str):
    return choice.meets_on_target(report, name)


def _measured(ctx: RunContext, m: Measurer, candidate) -> rp.RepairRung:
    """The rung's model measured like every model, then checked on the target."""
    base = dict(rung=candidate.rung, label=candidate.label, detail=candidate.detail, seconds=candidate.seconds)
    if candidate.model is None:
        status = rp.FAILED if candidate.applies else rp.DOES_NOT_APPLY
        return rp.RepairRung(status=status, error=candidate.error, **base)
    transform = candidate.input_transform
    name = variants.repair(candidate.rung)
    try:
        measurer = _with_transform(m, transform)
        result: VariantResult = measurer.build_and_measure(name, lambda: candidate.model, variants.LITERT)
        if result.ok:
            checked, _ = on_target.check_all(dataclasses.replace(ctx, data=measurer.data), measurer,
                                             {name: result}, None)
            result = checked[name]
    except Exception as exc:  # noqa: BLE001 - one rung's failure is its finding, never the run's
        traceback.print_exc()
        return rp.RepairRung(status=rp.FAILED, error=one_line(exc), input_transform=transform, **base)
    if not result.ok:
        return rp.RepairRung(status=rp.FAILED, error=result.error or "", model=result, input_transform=transform,
                             **base)
    return rp.RepairRung(status=rp.MISSES, model=result, input_transform=transform, **base)


def _with_transform(m: Measurer, transform) -> Measurer:
    """The measurer reading the evaluation data as the host would feed it: standardized by `transform` (its outputs
    and float's stay shared, so the rung's model is paired with float's run on the same samples)."""
    if transform is None:
        return m
    x = m.data.x.arrays if hasattr(m.data.x, "arrays") else {"": m.data.x}
    return dataclasses.replace(m, data=dataclasses.replace(m.data, x=Inputs(transform.apply(x))))
