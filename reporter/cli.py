"""The command line: `quant-report run | batch | render | demo`, a thin layer over the Python API (reporter/api.py).

Every argument of every subcommand is declared in reporter/core/schema.py (COMMANDS, TOP) and made, with its check,
by reporter/inputs/settings.py; exit codes from reporter/core/exit_codes.py; `main(argv)` returns the code and never
exits itself."""

from __future__ import annotations

import argparse
import difflib
import functools
import os
import sys
import traceback
from typing import Optional

from reporter.core.errors import UsageError
from reporter.core.exit_codes import ExitCode, exit_code, help_text
from reporter.core.schema import COMMANDS, DEMO_MODELS, TOP
from reporter.inputs.settings import BATCH, GATE, RUN, add_flags, from_args
from reporter.plugins import PluginError, load as load_plugins, register_builtins, unloaded

# TensorFlow's C++ start-up lines are noise for a user; run.log still gets the converter's output.
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")


class _Parser(argparse.ArgumentParser):
    """argparse that raises UsageError (so `main` returns 2) instead of exiting, and that answers a
    mistyped flag with this subcommand's usage and the closest flag."""

    long_flags: list = ["--help"]  # the flags the builder made (argparse keeps its own list private)

    def error(self, message):
        if message.startswith("argument "):  # a flag's value: one line, the flag and what is wrong with it
            raise UsageError(f"{self.prog}: error: {message}")
        raise UsageError(f"{self.format_usage().strip()}\n{self.prog}: error: {message}")

    def parse_args(self, args=None, namespace=None):
        args, extras = self.parse_known_args(args, namespace)
        if extras:
            sub = getattr(args, "_parser", self)
            flags = getattr(sub, "long_flags", [])
            first = extras[0].split("=", 1)[0]
            close = difflib.get_close_matches(first, flags, n=1, cutoff=0.6) if first.startswith("-") else []
            hint = f"; did you mean {close[0]}?" if close else ""
            sub.error(f"unrecognized argument{'s' if len(extras) > 1 else ''}: {' '.join(extras)}{hint}")
        return args


COMMAND_HELP = {  # each subcommand's one line; its arguments: reporter.core.schema.COMMANDS
    "run": "report on one model and its data",
    "batch": "run many models from a TOML config, in parallel, with an index",
    "diff": "compare two runs: report.json files, report folders or batch folders",
    "render": "re-render a saved report.json (TensorFlow not needed)",
    "demo": f"train (once) and report on the {len(DEMO_MODELS)} built-in demo models",
}


def build_parser(width: Optional[int] = None) -> argparse.ArgumentParser:
    """The command line's parser, every argument from its declaration; `width` fixes the help's line width (the
    generated reference), else the terminal's."""
    register_builtins()  # the composition root: --task and --target offer the registered plug-ins
    formatter = (functools.partial(argparse.RawDescriptionHelpFormatter, width=width) if width
                 else argparse.RawDescriptionHelpFormatter)
    common = dict(formatter_class=formatter, epilog=help_text())
    parser = _Parser(
        prog="quant-report",
        description="What int8 quantization did to a TensorFlow model, and which layers to keep in float.",
        **common,
    )
    parser.long_flags = ["--help", *add_flags(parser, TOP)]
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    parser.subcommands = {}  # name -> parser, for the generated reference
    for name, help_ in COMMAND_HELP.items():
        p = sub.add_parser(name, help=help_, description=help_, **common)
        p.set_defaults(_parser=p)
        p.long_flags = ["--help", *add_flags(p, COMMANDS[name])]
        parser.subcommands[name] = p
    return parser


REFERENCE_WIDTH = 100  # the generated reference's line width, whatever the terminal


def reference_markdown() -> str:
    """docs/reference/settings.md: every setting as declared (reporter/core/schema.py: flag, batch-file key,
    value, default, help) and each subcommand's --help, at a fixed width. `python -m reporter.cli reference`
    writes it; tests/test_docs.py checks the page is what this makes."""
    register_builtins()  # --task's words name the registered kinds

    def cell(text) -> str:
        return str(text).replace("|", "\\|").replace("\n", " ")

    def default(setting) -> str:
        value = setting.default
        if value is None or value == () or value == []:
            return "none"
        return ",".join(value) if isinstance(value, (tuple, list)) else str(value).lower() if isinstance(
            value, bool) else str(value)

    lines = ["# Settings and command-line reference", "",
             "Generated from the settings' declarations (`reporter/core/schema.py`) and the command line's parser by"
             " `python -m reporter.cli reference > docs/reference/settings.md`; a test checks this page is what they"
             " make.", "",
             "## Run settings", "",
             "Each is a flag of `run` and `demo`, a key of a batch file's `[defaults]` or `[[model]]`, a keyword of"
             " `reporter.run(...)`, and a field of report.json's `settings` (but `formats` and `data_timeout`, which"
             " change how a run is written or waited for, not what it measures).", "",
             "| flag | batch key / keyword | value | default | what |", "|---|---|---|---|---|"]
    lines += [f"| `{s.flag}` | `{s.name}` | {cell(s.must_be)} | `{cell(default(s))}` | {cell(s.help)} |" for s in RUN]
    lines += ["", "## Gate settings", "", "Flags of `run`, keys of a batch file's `[gate]` table, keywords of"
              " `reporter.run(...)`, fields of report.json's `settings`.", "",
              "| flag | batch key | keyword | value | default | what |", "|---|---|---|---|---|---|"]
    lines += [f"| `{s.flag}` | `{s.key}` | `{s.name}` | {cell(s.must_be)} | `{cell(default(s))}` | {cell(s.help)} |"
              for s in GATE]
    lines += ["", "## Batch settings", "", "Flags of `batch` and keys of a batch file's `[batch]` table (the flags win);"
              " not recorded in report.json.", "", "| flag | batch key | value | default | what |", "|---|---|---|---|---|"]
    lines += [f"| `{s.flag}` | `{s.key}` | {cell(s.must_be)} | `{cell(default(s))}` | {cell(s.help)} |" for s in BATCH]
    for name, sub in build_parser(REFERENCE_WIDTH).subcommands.items():
        lines += ["", f"## quant-report {name}", "", "```text", sub.format_help().rstrip(), "```"]
    return "\n".join(lines) + "\n"


def _plugins_first(argv) -> Optional[int]:
    """--plugin, read on its own and loaded before the parser is built: --task's and --target's choices and help are
    the registries', a plug-in's kinds and targets among them. The exit code after one line naming a plug-in that
    cannot be loaded; None when all are (or none is given; the parser then says what else is wrong)."""
    import dataclasses

    from reporter.core.schema import PLUGIN

    argv = sys.argv[1:] if argv is None else [str(a) for a in argv]
    first = _Parser(prog="quant-report", add_help=False, allow_abbrev=False)
    add_flags(first, [dataclasses.replace(PLUGIN, check=lambda v: True)])  # what each is: said by loading it
    try:
        specs = first.parse_known_args(argv)[0].plugin
    except UsageError:  # `--plugin` without a value: the parser's own line
        return None
    try:
        load_plugins(specs)
    except PluginError as exc:
        command = next((a for a in argv if a in COMMANDS), "")
        print(f"quant-report{' ' + command if command else ''}: error: argument --plugin: {exc}", file=sys.stderr)
        return int(ExitCode.USAGE)
    return None


def main(argv=None) -> int:
    """The command line; returns the exit code (see reporter/core/exit_codes.py), never exits itself."""
    register_builtins()  # the built-in and installed plug-ins, before the user's own (--plugin)
    failed = _plugins_first(argv)
    if failed is not None:
        return failed
    try:
        args = build_parser().parse_args(argv)
    except UsageError as exc:
        print(exc, file=sys.stderr)
        return int(ExitCode.USAGE)
    except SystemExit as exc:  # --help and --version print and exit 0
        return exc.code if isinstance(exc.code, int) else int(ExitCode.USAGE)
    from reporter.core.lifetime import TERMINATED_EXIT, Terminated, terminate_raises

    try:
        with terminate_raises():  # SIGTERM cleans up as Ctrl-C does: staging folder removed, side process stopped
            if args.command == "run":
                return _run(args)
            if args.command == "demo":
                return _demo(args)
            if args.command == "render":
                return _render(args)
            if args.command == "diff":
                return _diff(args)
            return _batch(args)
    except KeyboardInterrupt:
        print("quant-report: interrupted", file=sys.stderr)
        return int(ExitCode.FAILED)
    except Terminated:
        print("quant-report: terminated", file=sys.stderr)
        return TERMINATED_EXIT


def entry():
    """The `quant-report` script and `python -m reporter`: main(), then a quick exit. Every report is written
    and closed by then; TensorFlow's own teardown (thread pools, 1-2 s after a big model) is skipped."""
    code = main()
    sys.stdout.flush()
    sys.stderr.flush()
    if "tensorflow" in sys.modules:  # nothing to tear down otherwise: a normal exit
        import os

        from reporter.core.lifetime import remove_autograph_files

        remove_autograph_files()  # what TensorFlow's atexit hook would have deleted
        os._exit(code)
    sys.exit(code)


def _settings(args, model, data, name):
    from reporter.inputs.settings import RunSettings

    gated = getattr(args, "max_accuracy_drop", None) is not None
    return RunSettings(
        model=str(model),
        data=str(data),
        out=args.out,
        name=name,
        **from_args(args),
        max_accuracy_drop=getattr(args, "max_accuracy_drop", None),
        gate_variant=getattr(args, "gate_variant", None) if gated else None,
        quiet=args.quiet,
    )


def _error(text: str):
    print(f"quant-report: error: {text}", file=sys.stderr)


def _run_one(settings, debug: bool):
    """Runs one model; prints a one-line error (traceback with --debug); returns (report, exit code)."""
    try:
        from reporter.api import run_settings  # the one path every run takes, the Python API's too

        report, _ = run_settings(settings)
        return report, ExitCode.OK
    except Exception as exc:  # noqa: BLE001 - an unexpected failure still gets one line
        return None, _run_failed(exc, settings, debug)


def _run_failed(exc: Exception, settings, debug: bool) -> ExitCode:
    """Prints the one line for a run that raised `exc` and returns its exit code. An error that only followed
    from SIGTERM (a library caught the `Terminated` and raised its own) ends the run as terminated instead."""
    from reporter.core.errors import QuantReportError, RenderError, UsageError, storage_problem
    from reporter.core.lifetime import stop_if_terminated

    stop_if_terminated(exc)
    if isinstance(exc, UsageError):  # settings that cannot go together: nothing ran
        _error(str(exc))
        return ExitCode.USAGE
    if debug and not isinstance(exc, RenderError):
        traceback.print_exception(exc)
    if isinstance(exc, QuantReportError):  # a RenderError too: measured and partly written, still a failure
        _error(str(exc))
        return ExitCode.FAILED
    full = storage_problem(exc)
    if full is not None:  # a full disk or a file-size limit is named as such, with the file
        _error(str(full))
        return ExitCode.FAILED
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    _error(f"{settings.model}: unexpected {type(exc).__name__}: {text} (rerun with --debug)")
    return ExitCode.FAILED


def _run(args) -> int:
    settings = _settings(args, args.model, args.data, args.name)
    if args.baseline and not _baseline_readable(args.baseline):
        return int(ExitCode.USAGE)
    report, code = _run_one(settings, args.debug)
    if report is None:
        return int(code)
    if _no_quantized_variant(report):  # the report is written, but it measured no quantization at all
        _error(f"{settings.model}: no quantized variant could be built (see the report's failed variants)")
        return int(ExitCode.FAILED)
    passed = applied = True
    gate = report.findings.gate  # the run's gate (--max-accuracy-drop, --gate-variant), decided with its findings
    if gate is not None:
        print(f"quant-report: gate {'passed' if gate.passed else 'FAILED'}: {gate.message}", file=sys.stderr)
        passed = gate.passed
    if args.baseline:
        from pathlib import Path

        from reporter.core.files import folder_name

        folder = Path(args.out) / folder_name(settings.display_name)
        baseline_passed, applied = _against_baseline(args.baseline, folder, folder, args.max_accuracy_drop)
        passed = baseline_passed and passed
    return exit_code(gate_failed=not passed, gate_not_applied=not applied)


def _no_quantized_variant(report) -> bool:
    """Quantized variants were asked for and none of them was built."""
    from reporter.core.variants import FLOAT

    quantized = [v for v in report.variants if v.name != FLOAT]
    return bool(quantized) and all(v.status != "ok" for v in quantized)


def _baseline_readable(base) -> bool:
    """--baseline is checked before anything runs: a typo must not cost a whole run."""
    from reporter.findings.diff import DiffError, load_side

    try:
        load_side(base)
    except DiffError as exc:
        _error(f"--baseline: {exc}")
        return False
    needs = unloaded(base)  # made with a plug-in's kind this run does not load: never compared as another kind
    if needs:
        _error(f"--baseline: {needs}")
        return False
    return True


def _gate_not_applied(result, flag: str) -> bool:
    """A gate was asked for (`flag`) and cannot be applied to some models (other data or tasks): one line
    saying why; True then (the caller exits 2). Never a silent pass."""
    from reporter.render.words.diff import gate_note

    models = result.gate_not_applied
    if not models:
        return False
    first = models[0]
    why = gate_note(first).removesuffix(": compared without a gate")
    more = f" (and {len(models) - 1} more model{'s' if len(models) > 2 else ''})" if len(models) > 1 else ""
    _error(f"{flag} {result.max_accuracy_drop:g} cannot be applied to {first.name}{more}: {why}")
    return True


def _against_baseline(base, new, folder, max_accuracy_drop) -> tuple[bool, bool]:
    """Writes diff.md and diff.json into `folder` and prints the baseline gate's failures; (passed, applied):
    passed False if it failed, applied False if a requested gate could not be applied (one line says why)."""
    from pathlib import Path

    from reporter.render import diff as rdiff
    from reporter.pipeline import conclude
    from reporter.render.formats import write_atomic

    result = conclude.compare_runs(base, new, max_accuracy_drop)
    for fmt in ("md", "json"):
        write_atomic(Path(folder) / f"diff.{fmt}", rdiff.render(result, fmt))
    for failure in result.gate_failures:
        print(f"quant-report: baseline gate FAILED: {failure.message}", file=sys.stderr)
    print(f"quant-report: against the baseline: {rdiff.summary(result)}; {Path(folder) / 'diff.md'}",
          file=sys.stderr)
    applied = not _gate_not_applied(result, "--max-accuracy-drop against --baseline")
    return not result.gate_failures, applied


def _diff(args) -> int:
    """Compares two runs; imports no TensorFlow."""
    from pathlib import Path

    from reporter.findings.diff import DiffError
    from reporter.render import diff as rdiff
    from reporter.pipeline import conclude
    from reporter.render.formats import write_atomic

    needs = unloaded(args.base) or unloaded(args.new)  # made with a plug-in's kind: never read as another kind
    if needs:
        _error(needs)
        return int(ExitCode.USAGE)
    try:
        result = conclude.compare_runs(args.base, args.new, args.max_accuracy_drop)
        data = rdiff.render(result, args.format)
    except DiffError as exc:
        _error(str(exc))
        return int(ExitCode.FAILED)
    except Exception as exc:  # noqa: BLE001 - whatever damaged reports still cause: one line, never a traceback
        _error(f"{args.base} against {args.new}: cannot be compared: {type(exc).__name__}: "
               f"{(str(exc).strip().splitlines() or [''])[0][:200]}")
        return int(ExitCode.FAILED)
    if args.out:
        out = Path(args.out)
        if out.is_dir():  # --out a folder: diff.md or diff.html in it
            out = out / f"diff.{args.format}"
        try:
            write_atomic(out, data)
        except OSError as exc:
            _error(f"{exc.filename or args.out}: cannot write ({exc.strerror})")
            return int(ExitCode.FAILED)
    else:
        sys.stdout.write(data.decode("utf-8"))
    for failure in result.gate_failures:
        print(f"quant-report: gate FAILED: {failure.message}", file=sys.stderr)
    not_applied = _gate_not_applied(result, "--max-accuracy-drop")
    return exit_code(gate_failed=bool(result.gate_failures), gate_not_applied=not_applied)


def _demo(args) -> int:
    from pathlib import Path

    from reporter.pipeline import demo
    from reporter.core.progress import Progress

    names = args.models or demo.MODELS
    failed = []
    for name in names:
        try:
            model_path, data_path = demo.ensure_model(
                name, say=(lambda t: None) if args.quiet else (lambda t: print(t, file=sys.stderr)),
                progress=Progress(name, quiet=args.quiet),
            )
        except Exception as exc:  # noqa: BLE001 - one demo model failing must not stop the others
            if args.debug:
                traceback.print_exc()
            _error(f"demo model {name} could not be trained: {exc}")
            failed.append(name)
            continue
        settings = _settings(args, model_path, data_path, name)
        # The demo's files live in the cache: show them relative to it, not as this machine's paths.
        settings.shown_paths = tuple(f"<demo cache>/{Path(p).relative_to(demo.cache_dir().parent).as_posix()}"
                                     for p in (model_path, data_path))
        if _run_one(settings, args.debug)[0] is None:
            failed.append(name)
    if failed:
        print(f"quant-report: {len(failed)} of {len(names)} demo models failed: {', '.join(failed)}",
              file=sys.stderr)
        return int(ExitCode.FAILED)
    return int(ExitCode.OK)


def _render(args) -> int:
    """Re-renders a saved report; imports no TensorFlow."""
    import json
    from pathlib import Path

    from reporter.render import formats as render
    from reporter.pipeline.conclude import load_report
    from reporter.model.decode import JSONLimitError, OutOfBounds

    src = Path(args.report)
    if src.is_dir():  # a report folder: its report.json
        if not (src / "report.json").is_file():
            _error(f"{src}: a folder without a report.json: give a report.json or the folder a run wrote")
            return int(ExitCode.FAILED)
        src = src / "report.json"
    out = Path(args.out) if args.out else src.parent / render.FILE_NAMES[args.format]
    if out.is_dir():  # --out a folder: the format's usual file name in it
        out = out / render.FILE_NAMES[args.format]
    needs = unloaded(src, kinds=False)  # a plug-in's figures: read only through its record
    if needs:
        _error(needs)
        return int(ExitCode.USAGE)
    shown = unloaded(src)  # a plug-in's kind not loaded here: shown from what report.json stores, never as another kind
    if shown:
        print(f"quant-report: note: {shown.replace('give it here too', 'shown from what report.json stores')}",
              file=sys.stderr)
    try:
        report = load_report(src)
        render.write_atomic(out, render.render(report, args.format))
    except FileNotFoundError as exc:
        _error(f"{exc.filename or src}: no such file or folder")
        return int(ExitCode.FAILED)
    except JSONLimitError as exc:  # nested too deep, a number too large: refused before it is decoded
        _error(f"{src}: {exc}")
        return int(ExitCode.FAILED)
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        _error(f"{src}: not a JSON file ({exc})")
        return int(ExitCode.FAILED)
    except OutOfBounds as exc:  # a figure no run can measure (reporter.model.bounds): the file given is wrong
        _error(f"{src}: {exc}")
        return int(ExitCode.FAILED)
    except (ValueError, TypeError, KeyError) as exc:
        if args.debug:
            traceback.print_exc()
        _error(f"{src}: not a quant-report report.json ({exc})")
        return int(ExitCode.FAILED)
    except OSError as exc:
        _error(f"{exc.filename or out}: cannot write ({exc.strerror})")
        return int(ExitCode.FAILED)
    except Exception as exc:  # noqa: BLE001 - whatever a damaged report.json still causes: one line
        if args.debug:
            traceback.print_exc()
        _error(f"{src}: cannot be rendered as {args.format}: {type(exc).__name__}: "
               f"{(str(exc).strip().splitlines() or [''])[0][:200]} (rerun with --debug)")
        return int(ExitCode.FAILED)
    print(out)
    return int(ExitCode.OK)


def _batch(args) -> int:
    """Runs the models of a config file in worker processes (or Ray tasks) and writes the index."""
    from pathlib import Path

    from reporter.batch import index
    from reporter.batch.config import ConfigError, load, plugins_of
    from reporter.batch.display import Display
    from reporter.batch.executor import BatchOptions, LocalPool
    from reporter.batch.runner import run_batch
    from reporter.core.errors import QuantReportError
    from reporter.core.files import check_writable

    given = load_plugins(args.plugin)  # loaded before the parser was built: their files, resolved
    for spec, where in plugins_of(args.config):  # the file's own, before its --task values are checked
        try:
            load_plugins([spec])
        except PluginError as exc:
            _error(f"{where}: plugin {exc}")
            return int(ExitCode.USAGE)
    try:
        config = load(args.config)
    except ConfigError as exc:
        for line in exc.problems:
            _error(line)
        return int(ExitCode.USAGE)
    for entry in config.models:  # each report records every plug-in its worker had (`render` names them)
        if given:
            entry.options["plugin"] = list(dict.fromkeys([*given, *entry.options.get("plugin", ())]))
    try:
        check_writable(args.out)
    except QuantReportError as exc:
        _error(str(exc))
        return int(ExitCode.FAILED)
    if args.baseline and not _baseline_readable(args.baseline):
        return int(ExitCode.USAGE)
    options = BatchOptions(out=Path(args.out), jobs=args.jobs or os.cpu_count() or 1, resume=args.resume,
                           executor=args.executor or config.batch.get("executor", "local"),
                           address=args.address or config.batch.get("address"),
                           cpus_per_task=args.cpus_per_task or config.batch.get("cpus_per_task", 1),
                           shared_dir=args.shared_dir)
    if options.executor == "ray":
        from reporter.batch.ray import require_ray

        try:
            require_ray()
        except UsageError as exc:
            _error(str(exc))
            return int(ExitCode.USAGE)
    display = Display(len(config.models), quiet=args.quiet)
    if options.executor == "ray":
        from reporter.batch.ray import RayPool

        pool = RayPool(options, display)
    else:
        pool = LocalPool(options, display)
    try:
        result = run_batch(config, options, pool)
    except UsageError as exc:  # a report folder the batch must not replace: nothing ran
        _error(str(exc))
        return int(ExitCode.USAGE)
    idx = index.build(config, args.out, result)
    written = index.write(idx, args.out)
    if result.interrupted:  # stopped by SIGTERM or Ctrl-C: the index of what finished is written, no baseline
        from reporter.core.lifetime import TERMINATED_EXIT

        done = len(result.outcomes) - len(result.unfinished)
        print(f"quant-report: {'terminated' if result.interrupted == 'SIGTERM' else 'interrupted'}:"
              f" {done} of {len(result.outcomes)} models finished; index: {written[1]}", file=sys.stderr)
        return TERMINATED_EXIT if result.interrupted == "SIGTERM" else int(ExitCode.FAILED)
    for row in idx.failed:
        print(f"quant-report: {row.name} failed at {row.stage}: {row.error}", file=sys.stderr)
    for row in idx.gate_failures:
        print(f"quant-report: gate FAILED for {row.name}: {row.gate['message']}", file=sys.stderr)
    if not args.quiet:
        print(f"quant-report: {index.IndexView(idx).summary}; index: {written[1]}", file=sys.stderr)
    baseline_passed, applied = (_against_baseline(args.baseline, args.out, args.out, args.max_accuracy_drop)
                                if args.baseline else (True, True))
    return exit_code(failed=bool(idx.failed), gate_failed=bool(idx.gate_failures) or not baseline_passed,
                     gate_not_applied=not applied)


if __name__ == "__main__" and sys.argv[1:] == ["reference"]:  # python -m reporter.cli reference
    sys.stdout.write(reference_markdown())
