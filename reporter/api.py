"""The Python API: `reporter.run(model, data, *, out=None, **settings) -> Report`, for notebooks and scripts.

    import reporter
    report = reporter.run(keras_model, {"x": x_test, "y": y_test, "x_calib": x_train[:200]}, target="int8")
    report                       # in Jupyter: the story panel and the model to ship, inline
    report.findings.decision     # the same typed records report.json is made from
    report.save("reports")       # what `quant-report run ... --out reports` writes
    report.model_bytes()         # the decided model's .tflite

`model` is a path (as on the command line), a `keras.Model` (Keras 3 or tf_keras) or the bytes of a float .tflite;
`data` a path or `module:function` (as on the command line), a mapping of arrays named as in an .npz (`x`, `y`,
`x_calib`, `x_<input>`, `y_<output>`, `meta_<name>`) or a `tf.data.Dataset` of `(x, y)` batches, read batch by
batch; `calibration=` a second dataset or the converter's representative-dataset generator; `plugins=` the user's
plug-ins (module names or .py files, as `--plugin` takes them), loaded first, whose task kinds and targets the
settings may then name (`task=`, `target=`). The settings are the
command line's flags by their Python names (`variants=["float", "fiq"]`, `target="int8"`, `max_accuracy_drop=0.01`),
checked by the same declarations: a bad one raises `reporter.QuantReportError` with the same one line. Without
`out`, nothing is written beyond temporary files, removed when the report is.

The command line runs every model through `run_settings` here: one code path.
"""

from __future__ import annotations

import contextlib
import dataclasses
import difflib
import os
import shutil
import tempfile
import weakref
from pathlib import Path
from typing import Optional, Union

from reporter.core.errors import InputError, QuantReportError, UsageError, one_line
from reporter.core.records import unstored
from reporter.model.report import Report as _Report
from reporter.render import FORMATS
from reporter.inputs import materialize
from reporter.inputs.settings import BY_NAME, GATE_BY_NAME, RunSettings, check_value
from reporter.plugins import PluginError, load as load_plugins, register_builtins

register_builtins()  # the composition root: every use of the API (a run, a report read back) has the plug-ins

__all__ = ["run", "Report", "QuantReportError", "run_settings"]

# Settings by their Python names: the declared ones (reporter.core.schema: the run's and the gate's), and quiet.
OTHER = ("quiet",)


@dataclasses.dataclass(frozen=True)
class Report(_Report):
    """The report of one run: the typed records report.json holds (`variants`, `findings`, `findings.decision`,
    `recommendation`, ...), with the run's files behind it."""

    folder: Optional[Path] = unstored(None)  # where the run wrote its files (a temporary folder without `out`)

    @property
    def decision(self):
        """The model to ship for the run's target (`findings.decision`): `.variant`, `.file`, `.reason`, ..."""
        return self.findings.decision if self.findings is not None else None

    def model_bytes(self, name: Optional[str] = None) -> bytes:
        """A model's .tflite: `name` is a variant ("fiq", "selective", "drq_fix", ...); by default the model decided
        for the run's target."""
        if name is None:
            decision = self.findings.decision if self.findings else None
            if decision is None or not decision.file:
                raise UsageError("model_bytes: no model was decided for the target; name one: "
                                 + ", ".join(self._model_names()))
            name = decision.variant
        path = self._files() / f"{name}.tflite"
        if name not in self._model_names() or not path.is_file():
            raise UsageError(f"model_bytes: no model {name!r}; the run built {', '.join(self._model_names())}")
        return path.read_bytes()

    def save(self, folder, formats=FORMATS) -> Path:
        """Writes what `quant-report run --out FOLDER` writes, into FOLDER/NAME/ (the reports in `formats`, every
        model's .tflite, layer_stats.csv, run.log); returns that folder. An earlier report of this name is replaced
        as a run replaces it; nothing else in FOLDER is touched."""
        from reporter.core.files import folder_name, staged_folder
        from reporter.render.formats import write_reports

        formats = _checked_formats(formats)
        source = self._files()
        with staged_folder(folder, self.model.name) as staging:
            for item in sorted(source.iterdir()):
                if item.is_file() and item.name not in _report_files():
                    shutil.copy2(item, staging / item.name)
            _, errors = write_reports(self, staging, formats)
            if errors:
                raise QuantReportError("could not render " + "; ".join(f"{f}: {e}" for f, e in errors.items()))
        return Path(folder) / folder_name(self.model.name)

    def _repr_html_(self) -> str:
        """The story panel and the model to ship, for Jupyter: self-contained (no script, no link out), every
        name escaped as in the HTML report."""
        from reporter.render.formats import render_notebook

        return render_notebook(self)

    def _files(self) -> Path:
        if self.folder is None or not Path(self.folder).is_dir():
            raise UsageError("this report's files are gone (its temporary folder was removed); run again with out=")
        return Path(self.folder)

    def _model_names(self) -> list[str]:
        return sorted(p.stem for p in Path(self.folder).glob("*.tflite")) if self.folder else []


def _report_files() -> set:
    from reporter.render import FILE_NAMES

    return set(FILE_NAMES.values())


def run(model, data, *, out: Union[str, Path, None] = None, name: Optional[str] = None, calibration=None,
        **settings) -> Report:
    """Runs every stage for one model and returns its report (see the module's documentation). Raises
    QuantReportError with one line when the model, the data, a plug-in (`plugins=`) or a setting cannot be used."""
    plugins = settings.pop("plugins", None)
    if plugins is not None:
        settings["plugin"] = _plugins(plugins, settings.get("plugin", ()))
    if "plugin" in settings:  # loaded before the settings are checked: they may name its kinds and targets
        settings["plugin"] = _loaded(settings["plugin"])
    with tempfile.TemporaryDirectory(prefix="quant-report-inputs-") as scratch:
        values = _checked(settings)
        with _about("model"):
            model_path = materialize.model_file(model, Path(scratch))
        samples = values.get("calibration_samples", BY_NAME["calibration_samples"].default)
        with _about("calibration" if calibration is not None and not _is_path(data) else "data"):
            data_spec = materialize.data_source(data, Path(scratch), calibration, samples)
        kept = None
        if out is None:
            kept = tempfile.mkdtemp(prefix="quant-report-")
            out = Path(kept) / "reports"
        shown = (_shown(model, str(model_path)), _shown(data, data_spec))
        run_name = name or materialize.model_name(model)
        try:
            s = RunSettings(model=str(model_path), data=data_spec, out=str(out), name=run_name,
                            shown_paths=shown, **values)
            measured, folder = run_settings(s)
        except BaseException as exc:
            if kept:
                shutil.rmtree(kept, ignore_errors=True)
            if isinstance(exc, InputError):  # an input given in memory: named as its argument, not its scratch file
                made = {path: argument for path, argument in ((str(model_path), "model"), (data_spec, "data"))
                        if path.startswith(scratch + os.sep)}
                raise _renamed(exc, made) from None
            raise
    report = Report(**{f.name: getattr(measured, f.name) for f in dataclasses.fields(_Report)}, folder=folder)
    if kept:
        weakref.finalize(report, shutil.rmtree, kept, True)
    return report


@contextlib.contextmanager
def _about(argument: str):
    """Any exception reading one argument becomes one QuantReportError line naming it. materialize already says
    each problem it knows of so; this is the backstop for one it does not (the original is kept as the cause)."""
    try:
        yield
    except QuantReportError:
        raise
    except Exception as exc:  # noqa: BLE001 - the user's input, whatever went wrong with it, said in one line
        raise UsageError(f"{argument}: could not be read: {one_line(exc)}") from exc


def _is_path(given) -> bool:
    return isinstance(given, (str, os.PathLike))


def _renamed(exc: InputError, temporary: dict) -> QuantReportError:
    """An InputError about a file `run` wrote from an input held in memory, named by its argument instead
    ("data: 'x' is ...", "data (y.npy): ..."); any other error as it is."""
    for path, argument in temporary.items():
        if exc.path == path:
            return UsageError(f"{argument}: {exc.problem}")
        if exc.path.startswith(path + os.sep):
            return UsageError(f"{argument} ({exc.path[len(path) + 1:]}): {exc.problem}")
    return exc


def _plugins(plugins, also) -> list:
    """`plugins=` (one name or file, or several) and `plugin=` together, as one list of text."""
    try:
        given = [plugins] if isinstance(plugins, (str, os.PathLike)) else list(plugins)
        also = [also] if isinstance(also, (str, os.PathLike)) else list(also)
    except TypeError:
        raise UsageError(f"plugins must be a module name, a .py file or a list of them, not {plugins!r}") from None
    return [os.fspath(p) if isinstance(p, os.PathLike) else p for p in (*also, *given)]


def _loaded(plugins) -> list:
    """The plug-ins loaded, as given (a UsageError in one line, "plugins: my_kind.py: no such file", for one that
    cannot be)."""
    plugins = _plugins(plugins, ())
    try:
        load_plugins(plugins)
    except PluginError as exc:
        raise UsageError(f"plugins: {exc}") from exc
    return plugins


def run_settings(settings: RunSettings) -> tuple[_Report, Path]:
    """The one path every run takes (the command line's and `run`'s): the plug-ins loaded, the settings and inputs
    checked before TensorFlow is imported, then the pipeline. Returns the report and its folder."""
    load_plugins(settings.plugin)  # loaded already by the command line and `run`; a second call does nothing
    settings.check()  # before importing the pipeline (1.4 s) and TensorFlow (4 s): bad input fails at once
    from reporter.pipeline.stages import run as pipeline_run

    return pipeline_run(settings)


def _shown(given, spec: str) -> str:
    """How the report names an input given in memory (a path is shown as given)."""
    if isinstance(given, (str, Path)):
        return str(given)
    if materialize.is_keras_model(given):
        return f"in memory: {type(given).__name__} {getattr(given, 'name', '')!s}".strip()
    if isinstance(given, (bytes, bytearray, memoryview)):
        return f"in memory: .tflite bytes ({len(given):,})"
    if materialize.is_dataset(given):
        return "in memory: tf.data.Dataset"
    return f"in memory: {type(given).__name__} of arrays ({', '.join(sorted(map(str, given)))})"


def _checked(settings: dict) -> dict:
    """The settings as RunSettings keyword arguments, each checked by its declaration; a UsageError with one line
    for the first that is unknown or invalid."""
    known = [*BY_NAME, *GATE_BY_NAME, *OTHER]
    values = {}
    for key, value in settings.items():
        if key in OTHER:
            if not isinstance(value, bool):
                raise UsageError(f"{key} must be true or false, not {value!r}")
            values[key] = value
            continue
        setting = BY_NAME.get(key) or GATE_BY_NAME.get(key)
        if setting is None:
            close = difflib.get_close_matches(key, known, n=1, cutoff=0.6)
            hint = f"; did you mean {close[0]}?" if close else f" (settings: {', '.join(sorted(known))})"
            raise UsageError(f"unknown setting {key!r}{hint}")
        if setting.kind == "list":
            if isinstance(value, str):
                value = [x.strip() for x in value.split(",") if x.strip()] if setting.comma else [value]
            if isinstance(value, (list, tuple)):
                value = tuple(str(x) if isinstance(x, Path) else x for x in value)
        problem = check_value(setting, list(value) if setting.kind == "list" and isinstance(value, tuple) else value)
        if problem is not None:
            raise UsageError(problem.replace(f"'{setting.name}'", key, 1))
        values[key] = value
    return values


def _checked_formats(formats) -> tuple:
    formats = (formats,) if isinstance(formats, str) else tuple(formats)
    unknown = [f for f in formats if f not in FORMATS]
    if unknown or not formats:
        raise UsageError(f"formats: choose from {', '.join(FORMATS)}, not {', '.join(map(repr, unknown)) or 'none'}")
    return formats
