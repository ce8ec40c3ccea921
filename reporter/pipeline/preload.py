"""Heavy imports done in the background while TensorFlow loads, exports and converts the model.

TensorFlow's converter spends most of a conversion in C++ without Python's lock, so a thread importing
scikit-learn, matplotlib, Jinja and (for a PDF) WeasyPrint meanwhile costs the run nothing; without it those
imports (2-3 s on a cold start) come after the measurements, on the critical path. Import errors are left for
the code that needs the module to raise where it is used; each is also said in run.log (the stream the run
captures when the preload starts) and kept in `FAILED`, so that none is lost without a word.
"""

from __future__ import annotations

import importlib
import sys
import threading

from reporter.core.errors import one_line

FAILED: dict[str, str] = {}  # module -> one-line error, for every preload that failed in this process

MODULES = ("sklearn.metrics", "scipy.stats", "matplotlib.pyplot", "jinja2", "reporter.render.formats",
           "reporter.render.plots")
PDF_MODULES = ("weasyprint",)


def start(formats) -> threading.Thread:
    """Starts the imports in a daemon thread and returns it."""
    names = MODULES + (PDF_MODULES if "pdf" in formats else ())
    thread = threading.Thread(target=_import_all, args=(names, sys.stderr), name="quant-report-preload",
                              daemon=True)
    thread.start()
    return thread


def _import_all(names, log):
    """Imports `names`; a failure is said on `log` (run.log while the run captures its output) and kept."""
    try:
        import matplotlib

        matplotlib.use("Agg")  # what reporter.render.plots uses; set before pyplot loads
    except Exception as exc:  # noqa: BLE001 - said below; the plots report it where they are drawn
        _failed("matplotlib", exc, log)
    for name in names:
        try:
            importlib.import_module(name)
        except Exception as exc:  # noqa: BLE001 - the code that needs it raises it again where it is used
            _failed(name, exc, log)


def _failed(name: str, exc: Exception, log) -> None:
    FAILED[name] = one_line(exc)
    try:
        log.write(f"quant-report: preloading {name} failed ({FAILED[name]}); the code that needs it will say so"
                  " where it is used\n")
        log.flush()
    except (OSError, ValueError):  # the run's log was closed meanwhile (the run ended): FAILED keeps it
        return
