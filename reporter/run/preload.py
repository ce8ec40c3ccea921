"""Heavy imports done in the background while TensorFlow loads, exports and converts the model.

TensorFlow's converter spends most of a conversion in C++ without Python's lock, so a thread importing
scikit-learn, matplotlib, Jinja and (for a PDF) WeasyPrint meanwhile costs the run nothing; without it those
imports (2-3 s on a cold start) come after the measurements, on the critical path. Import errors are left for
the code that needs the module to raise where it is used.
"""

from __future__ import annotations

import importlib
import threading

MODULES = ("sklearn.metrics", "scipy.stats", "matplotlib.pyplot", "jinja2", "reporter.render.formats",
           "reporter.render.plots")
PDF_MODULES = ("weasyprint",)


def start(formats) -> threading.Thread:
    """Starts the imports in a daemon thread and returns it."""
    names = MODULES + (PDF_MODULES if "pdf" in formats else ())
    thread = threading.Thread(target=_import_all, args=(names,), name="quant-report-preload", daemon=True)
    thread.start()
    return thread


def _import_all(names):
    import matplotlib

    matplotlib.use("Agg")  # what reporter.render.plots uses; set before pyplot loads
    for name in names:
        try:
            importlib.import_module(name)
        except Exception:  # noqa: BLE001 - the code that needs it reports the error where it is used
            pass
