"""quant-report: what int8 quantization did to a TensorFlow model, and how to fix it.

    import reporter
    report = reporter.run(model, data, target="int8")   # see reporter.api

`reporter.run`, `reporter.Report` and `reporter.QuantReportError` are the Python API (reporter/api.py)."""

from reporter.core.version import __version__  # noqa: F401 - the package's version
from reporter.plugins import register_builtins

# The package is the composition root: the built-in task kinds, targets and repair rungs are registered when it is
# first imported, whatever module a program imports first (the registries sit low, in reporter.core, and never
# reach up to fill themselves). Costs about 0.15 s and imports no TensorFlow.
register_builtins()


def __getattr__(name):
    """The API's names, imported on first use (the command line does not need them to start)."""
    if name in ("run", "Report", "QuantReportError"):
        from reporter import api

        return getattr(api, name)
    raise AttributeError(f"module 'reporter' has no attribute {name!r}")
