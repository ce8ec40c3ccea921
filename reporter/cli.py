"""The command line: `quant-report run | demo`, a thin layer over the pipeline."""

from __future__ import annotations

import argparse
import os
import sys
import traceback

from reporter import __version__

# Exit codes.
OK = 0
FAILED = 1  # bad input, or a model of the batch failed
GATE_FAILED = 2  # every model reported, but one lost more accuracy than the gate allows
USAGE = 2  # argparse's own code for bad flags (it exits before any model runs)

# TensorFlow's C++ start-up lines are noise for a user; run.log still gets the converter's output.
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")


def _variant_list(text: str) -> tuple:
    return tuple(v.strip() for v in text.split(",") if v.strip())


def _add_run_options(p: argparse.ArgumentParser):
    p.add_argument("--out", default="reports", help="output folder (default: reports)")
    p.add_argument(
        "--variants",
        type=_variant_list,
        default=("float", "drq", "fiq"),
        help="comma-separated: float, drq, fiq, f16, int16x8, int8_io (default: float,drq,fiq)",
    )
    p.add_argument("--calibration-samples", type=int, default=100, metavar="N",
                   help="samples used for calibration and the debugger (default: 100)")
    p.add_argument("--suspect-threshold", type=float, default=0.7, metavar="T",
                   help="rmse/scale above which a layer is suspect (default: 0.7)")
    p.add_argument("--first-layers", type=int, default=0, metavar="N",
                   help="also keep the first N debugged layers in float (default: 0; the seed notebook uses 5)")
    p.add_argument("--recommend", choices=("search", "rule"), default="search",
                   help="search: measure candidate models for the fewest layers to keep in float (default);"
                        " rule: the seed notebook's rmse/scale rule")
    p.add_argument("--search-budget", type=int, default=60, metavar="N",
                   help="candidate models the search may build and measure (default: 60)")
    p.add_argument("--selection-samples", type=int, default=500, metavar="N",
                   help="samples the search chooses on: x_calib beyond the calibration samples, else a held-out"
                        " half of x (default: 500)")
    p.add_argument("--keep-float", action="append", default=[], metavar="NAME",
                   help="keep this tensor's op in float in every candidate (repeatable; names as in layer_stats.csv)")
    p.add_argument("--keep-float-ops", type=_variant_list, action="extend", default=[], metavar="OPS",
                   help="keep every op of these types in float, e.g. MEAN (comma-separated, repeatable)")
    p.add_argument("--latency-runs", type=int, default=50, metavar="N",
                   help="timed single-sample invokes per variant (default: 50)")
    p.add_argument("--formats", type=_variant_list, default=("html", "pdf", "md", "json"),
                   help="comma-separated: html, pdf, md, json (default: all)")
    p.add_argument("--quiet", action="store_true", help="no progress lines")
    p.add_argument("--debug", action="store_true", help="show tracebacks")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="quant-report",
        description="What int8 quantization did to a TensorFlow model, and which layers to keep in float.",
    )
    parser.add_argument("--version", action="version", version=f"quant-report {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)

    run = sub.add_parser("run", help="report on one model and its data")
    run.add_argument("model", help="a .keras file, a legacy .h5 file or a SavedModel folder")
    run.add_argument("--data", required=True,
                     help="an .npz with x, y and optional x_calib, or package.module:function returning them")
    run.add_argument("--name", help="report name (default: the model file's name)")
    run.add_argument("--max-accuracy-drop", type=float, metavar="D",
                     help="gate: exit with code 2 when the gate variant loses more than D accuracy (0..1) vs float;"
                          " also the search's target")
    run.add_argument("--gate-variant", default="fiq", help="the variant the gate checks (default: fiq)")
    _add_run_options(run)

    batch = sub.add_parser("batch", help="run many models from a TOML config, in parallel, with an index")
    batch.add_argument("config", help="a TOML file with [defaults], optional [gate] and [[model]] entries")
    batch.add_argument("--out", default="reports", help="output folder (default: reports)")
    batch.add_argument("--jobs", type=int, default=os.cpu_count() or 1, metavar="N",
                       help="models run at once, each in its own process (default: number of cores)")
    batch.add_argument("--resume", action="store_true",
                       help="skip models whose complete report exists and whose inputs have not changed")
    batch.add_argument("--quiet", action="store_true", help="no progress display")

    render = sub.add_parser("render", help="re-render a saved report.json (TensorFlow not needed)")
    render.add_argument("report", help="a report.json written by quant-report")
    render.add_argument("--format", required=True, choices=("html", "pdf", "md", "json"))
    render.add_argument("--out", help="output file (default: report.html, report.pdf or summary.md beside it)")
    render.add_argument("--debug", action="store_true", help="show tracebacks")

    demo = sub.add_parser("demo", help="train (once) and report on the three built-in demo models")
    demo.add_argument("--models", type=_variant_list, default=None,
                      help="comma-separated subset of: digits_cnn, digits_lstm, breast_cancer_mlp")
    _add_run_options(demo)
    return parser


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    try:
        if args.command == "run":
            return _run(args)
        if args.command == "demo":
            return _demo(args)
        if args.command == "render":
            return _render(args)
        if args.command == "batch":
            return _batch(args)
    except KeyboardInterrupt:
        print("quant-report: interrupted", file=sys.stderr)
        return FAILED
    return USAGE


def _settings(args, model, data, name):
    from reporter.pipeline import RunSettings

    return RunSettings(
        model=str(model),
        data=str(data),
        out=args.out,
        name=name,
        variants=args.variants,
        calibration_samples=args.calibration_samples,
        suspect_threshold=args.suspect_threshold,
        first_layers=args.first_layers,
        latency_runs=args.latency_runs,
        formats=args.formats,
        recommend=args.recommend,
        search_budget=args.search_budget,
        selection_samples=args.selection_samples,
        keep_float=tuple(args.keep_float),
        keep_float_ops=tuple(args.keep_float_ops),
        max_accuracy_drop=getattr(args, "max_accuracy_drop", None),
        gate_variant=getattr(args, "gate_variant", None) if getattr(args, "max_accuracy_drop", None) is not None
        else None,
        quiet=args.quiet,
    )


def _run_one(settings, debug: bool):
    """Runs one model; prints a one-line error (traceback with --debug) and returns None on failure."""
    from reporter.errors import QuantReportError
    from reporter.pipeline import run

    try:
        report, _ = run(settings)
        return report
    except QuantReportError as exc:
        if debug:
            traceback.print_exc()
        print(f"quant-report: error: {exc}", file=sys.stderr)
    except Exception as exc:  # noqa: BLE001 - an unexpected failure still gets one line
        if debug:
            traceback.print_exc()
        print(f"quant-report: error: {settings.model}: unexpected {type(exc).__name__}: "
              f"{str(exc).strip().splitlines()[0] if str(exc).strip() else ''} (rerun with --debug)",
              file=sys.stderr)
    return None


def _run(args) -> int:
    from reporter.config import GATE_KEYS, Gate

    gate = None
    if args.max_accuracy_drop is not None:
        for key, value in (("max_accuracy_drop", args.max_accuracy_drop), ("variant", args.gate_variant)):
            check, what = GATE_KEYS[key]
            if not check(value):
                print(f"quant-report: error: --{key.replace('_', '-')} must be {what}, not {value!r}",
                      file=sys.stderr)
                return FAILED
        gate = Gate(args.max_accuracy_drop, args.gate_variant)
    report = _run_one(_settings(args, args.model, args.data, args.name), args.debug)
    if report is None:
        return FAILED
    if gate is None:
        return OK
    from reporter.gate import check

    result = check(report, gate)
    print(f"quant-report: gate {'passed' if result.passed else 'FAILED'}: {result.message}", file=sys.stderr)
    return OK if result.passed else GATE_FAILED


def _demo(args) -> int:
    from pathlib import Path

    from reporter import demo
    from reporter.progress import Progress

    names = args.models or demo.MODELS
    unknown = [n for n in names if n not in demo.MODELS]
    if unknown:
        print(f"quant-report: error: unknown demo model(s) {', '.join(unknown)}; "
              f"choose from {', '.join(demo.MODELS)}", file=sys.stderr)
        return FAILED
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
            print(f"quant-report: error: demo model {name} could not be trained: {exc}", file=sys.stderr)
            failed.append(name)
            continue
        settings = _settings(args, model_path, data_path, name)
        # The demo's files live in the cache: show them relative to it, not as this machine's paths.
        settings.shown_paths = tuple(f"<demo cache>/{Path(p).relative_to(demo.cache_dir().parent).as_posix()}"
                                     for p in (model_path, data_path))
        if _run_one(settings, args.debug) is None:
            failed.append(name)
    if failed:
        print(f"quant-report: {len(failed)} of {len(names)} demo models failed: {', '.join(failed)}",
              file=sys.stderr)
        return FAILED
    return OK


def _render(args) -> int:
    """Re-renders a saved report; imports no TensorFlow."""
    import json
    from pathlib import Path

    from reporter import render
    from reporter.report import Report

    src = Path(args.report)
    try:
        report = Report.from_json(src.read_text(encoding="utf-8"))
        out = Path(args.out) if args.out else src.parent / render.FILE_NAMES[args.format]
        render.write_atomic(out, render.render(report, args.format))
    except FileNotFoundError:
        print(f"quant-report: error: {src}: no such file", file=sys.stderr)
        return FAILED
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        print(f"quant-report: error: {src}: not a JSON file ({exc})", file=sys.stderr)
        return FAILED
    except (ValueError, TypeError, KeyError) as exc:
        if args.debug:
            traceback.print_exc()
        print(f"quant-report: error: {src}: not a quant-report report.json ({exc})", file=sys.stderr)
        return FAILED
    except OSError as exc:
        print(f"quant-report: error: {exc.filename or out}: cannot write ({exc.strerror})", file=sys.stderr)
        return FAILED
    print(out)
    return OK


def _batch(args) -> int:
    """Runs the models of a config file in worker processes and writes the index."""
    from reporter import index
    from reporter.batch import Display, run_batch
    from reporter.config import ConfigError, load

    try:
        config = load(args.config)
    except ConfigError as exc:
        for line in exc.problems:
            print(f"quant-report: error: {line}", file=sys.stderr)
        return FAILED
    if args.jobs < 1:
        print("quant-report: error: --jobs must be 1 or more", file=sys.stderr)
        return FAILED
    display = Display(len(config.models), quiet=args.quiet)
    result = run_batch(config, args.out, args.jobs, args.resume, display)
    idx = index.build(config, args.out, result)
    written = index.write(idx, args.out)
    for row in idx.failed:
        print(f"quant-report: {row.name} failed at {row.stage}: {row.error}", file=sys.stderr)
    for row in idx.gate_failures:
        print(f"quant-report: gate FAILED for {row.name}: {row.gate['message']}", file=sys.stderr)
    if not args.quiet:
        print(f"quant-report: {index.IndexView(idx).summary}; index: {written[1]}", file=sys.stderr)
    return idx.exit_code
