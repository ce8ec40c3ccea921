"""Section 5, the appendix: Model Explorer commands, the legend (its thresholds written from
reporter.core.judgement), settings, timings and the TFLite Analyzer's text."""

from __future__ import annotations

from dataclasses import dataclass

from reporter.core import judgement as jd
from reporter.model.report import RMSE_OVER_SCALE_IDEAL
from reporter.render.views.common import Basis, latency_note, threshold_words


# Model Explorer's own package, as pyproject.toml's `explorer` extra requires it (a test keeps the two the same). The
# hint names the package, not the extra: quant-report is installed from a clone, and no index serves
# "quant-report[explorer]"; the package installs from any index whichever way quant-report came.
EXPLORER_REQUIREMENT = "ai-edge-model-explorer>=0.1.34"


def legend_entries() -> tuple[tuple[str, str], ...]:
    """Every term the report uses, with the thresholds judgement applies now."""
    words = threshold_words()
    return (
        ("~", f"equal to the float model (tensor counts, sizes), within {words.metric_same} of it (metrics), or"
              f" neither faster nor slower beyond timing noise (latency: the medians lie no further apart than either"
              f" model's own spread, p90 − median, or fewer than {jd.MIN_TIMED_RUNS} runs were timed)."),
        ("↑ / ↓", "higher / lower than the float model."),
        ("↑↑ / ↓↓", f"more than {words.count_big} higher / lower (counts, sizes, latency), or more than"
                    f" {words.metric_big} (metrics)."),
        ("good / bad colour", "green where the change helps (smaller, faster, more accurate), red where it hurts;"
                              " the arrows carry the same meaning in grey print."),
        ("Accuracy", "share of evaluation samples whose top class is the true label."),
        ("Precision, recall, F1 (macro)", "per-class precision, recall and their harmonic mean, averaged over"
                                          " classes with equal weight."),
        ("Balanced accuracy", "the mean of per-class recall; robust to unbalanced classes."),
        ("Cohen's kappa", "agreement with the true labels beyond chance: 1 perfect, 0 no better than chance."),
        ("Agreement with float", "share of samples where the variant predicts the same class as the float model."),
        ("Latency", "median and 90th percentile of one single-sample invoke on one thread after warm-up,"
                    " on the machine that made the report."),
        ("Range", "255 x scale: the span of float values the tensor's int8 grid covers."),
        ("RMSE/scale", "root-mean-square error between float and quantized output, in quantization steps;"
                       f" about {RMSE_OVER_SCALE_IDEAL:.3f} (1/sqrt(12)) when the error is pure rounding."),
        ("Propagated RMSE/scale", "the same error measured against a float copy of the whole model (whole-model"
                                  " verify): where error piles up, while RMSE/scale shows where it is made."),
        ("Flagged by the rule", "a layer with RMSE/scale above the threshold, or among the first N layers if asked:"
                                " the seed notebook's rule, shown for comparison with the measured search."),
        ("Selection score", "what the search chooses on: agreement with the float model's predictions on the"
                            " selection samples (or 1 - output MSE / variance for a regression output)."),
        ("Pareto", "a candidate that no other candidate beats on both size and accuracy."),
        ("Gap recovered", "(the search's model - FIQ) / (float - FIQ) accuracy, the search's model being FIQ with"
                          " the layers it keeps in float: 100 % means it is as accurate as float."),
    )


@dataclass(frozen=True)
class AnalyzerFile:
    """One variant's TFLite Analyzer text: the file beside the report and its first lines."""

    label: str
    file: str
    head: str  # the first `shown` lines
    shown: int
    total: int


class AppendixView:
    """The legend, settings, timings, Analyzer texts and Model Explorer commands."""

    ANALYZER_HEAD_LINES = 40

    def __init__(self, basis: Basis):
        self.basis = basis

    @property
    def legend(self) -> tuple[tuple[str, str], ...]:
        """The legend, with how latency was timed in this report added to its entry."""
        entries = legend_entries()
        note = latency_note(self.basis.report.settings)
        if not note:
            return entries
        return tuple((term, f"{text} {note}" if term == "Latency" else text) for term, text in entries)

    @property
    def explorer_install(self) -> str:
        """The shell command that installs Model Explorer (`model-explorer`)."""
        return f'pip install "{EXPLORER_REQUIREMENT}"'

    @property
    def explorer_commands(self) -> list[tuple[str, str]]:
        """The model-explorer command line for each variant that has overlays."""
        from reporter.debug.overlays import explorer_command

        return [(self.basis.long(v.name), explorer_command(f"{v.name}.tflite", v.overlays))
                for v in self.basis.report.variants if v.ok and v.overlays]

    @property
    def timings(self) -> list[tuple[str, str]]:
        items = list(self.basis.report.timings_s.items())
        total = sum(v for _, v in items)
        return [(k, f"{v:.2f} s") for k, v in items] + [("total", f"{total:.2f} s")]

    @property
    def settings(self) -> list[tuple[str, str]]:
        return [(k, ", ".join(map(str, v)) if isinstance(v, list) else str(v))
                for k, v in self.basis.report.settings.items()]

    @property
    def analyzer_files(self) -> list[AnalyzerFile]:
        """Each variant's Analyzer text, as the file beside the report and its first lines."""
        out = []
        for c in self.basis.columns:
            if c.analyzer_text:
                lines = c.analyzer_text.splitlines()
                head = lines[: self.ANALYZER_HEAD_LINES]
                out.append(AnalyzerFile(self.basis.long(c.name), f"analyzer_{c.name}.txt", "\n".join(head),
                                        len(head), len(lines)))
        return out

    @property
    def analyzer_missing(self) -> list[tuple[str, str]]:
        """(variant, error) for each built variant whose Analyzer text could not be taken."""
        return [(self.basis.long(c.name), c.not_measured("analyzer"))
                for c in self.basis.ok_columns if c.not_measured("analyzer")]
