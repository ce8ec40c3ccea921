"""Same inputs, same report: the outputs of two checkouts (or two runs) compared, times and versions aside.

Run by hand (not in CI), e.g. before and after a refactoring:
    python benchmarks/same_output.py run OUT_BEFORE [--src OTHER_CHECKOUT]
    python benchmarks/same_output.py run OUT_AFTER
    python benchmarks/same_output.py compare OUT_BEFORE OUT_AFTER

`run` (optionally for one `--target`) reports the three demo models, the four collapse fixtures and three float .tflite
files (from the model cache that `quant-report demo`, the test suite and benchmarks/profile_stages.py fill) with `--latency-runs 0` (latency is a time, it differs
run to run), as HTML, Markdown and JSON. `compare` masks what may differ between two identical runs
(generated_at, tool and TensorFlow versions, stage timings, the search's seconds, and seconds in the
text) and prints a unified diff of anything else; it exits 1 when any file differs.
It uses only the command line and the cache's file layout, so it runs against any checkout.
"""

from __future__ import annotations

import argparse
import difflib
import json
import os
import re
import subprocess
import sys
from pathlib import Path

DEMO = ("digits_cnn", "digits_lstm", "breast_cancer_mlp")
COLLAPSE = ("wine_offset", "outlier_channel", "rule_worse", "mobilenet_offset")
TFLITE = ("shipped-tflite-v*/digits_conv/plain.tflite", "shipped-tflite-v*/anchors/anchors.tflite",
          "speed-v*/audio/model.tflite")  # float .tflite files as users ship them (the tests' and profile's fixtures)
FILES = ("report.json", "summary.md", "report.html")
TIME_KEYS = {"generated_at", "tool_version", "tensorflow_version", "timings_s", "seconds", "seconds_per_candidate"}


def _cache() -> Path:
    return Path(os.environ.get("QUANT_REPORT_CACHE") or Path.home() / ".cache" / "quant-report")


def _models() -> dict[str, tuple[Path, Path]]:
    found = {}
    for name in DEMO + COLLAPSE:  # demo-v*/NAME/NAME.{keras,h5,npz}; collapse-v*/NAME/{model.keras,data.npz}
        hits = sorted(p for p in _cache().glob(f"*/{name}/*") if p.suffix in (".keras", ".h5"))
        if not hits:
            sys.exit(f"{name}: not in the model cache {_cache()}; run `quant-report demo` and the slow tests first")
        data = hits[-1].with_name("data.npz")
        found[name] = (hits[-1], data if data.exists() else hits[-1].with_suffix(".npz"))
    for pattern in TFLITE:  # those the cache holds (the tests build the shipped ones, the profile the speed ones)
        hits = sorted(_cache().glob(pattern))
        if hits:
            found[f"{hits[-1].parent.name}_{hits[-1].stem}_tflite"] = (hits[-1], hits[-1].with_name("data.npz"))
    return found


def run(out: Path, src: Path | None, target: str | None = None) -> None:
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2", **({"PYTHONPATH": str(src)} if src else {})}
    for name, (model, data) in _models().items():
        argv = [sys.executable, "-m", "reporter", "run", str(model), "--data", str(data), "--out", str(out),
                "--name", name, "--quiet", "--latency-runs", "0", "--formats", "html,md,json",
                *(["--target", target] if target else [])]
        code = subprocess.run(argv, env=env, cwd=src or None).returncode
        print(f"{name}: exit {code}")


def _mask_json(value):
    if isinstance(value, dict):
        return {k: ("<masked>" if k in TIME_KEYS else _mask_json(v)) for k, v in value.items()}
    if isinstance(value, list):
        return [_mask_json(v) for v in value]
    return value


def _mask_text(text: str) -> str:
    text = re.sub(r"\d+(\.\d+)?\s?(s|ms|seconds)\b", "<time>", text)
    text = re.sub(r"\b20\d\d-\d\d-\d\d[T ][0-9:.+Z-]+", "<date>", text)
    text = re.sub(r"(quant-report|TensorFlow|tensorflow)( version)?\s+v?[0-9][0-9.a-z+-]*", r"\1 <version>", text)
    return text


def _normal(path: Path) -> list[str]:
    text = path.read_text()
    if path.suffix == ".json":
        text = json.dumps(_mask_json(json.loads(text)), indent=1, sort_keys=True)
    return _mask_text(text).splitlines()


def compare(a: Path, b: Path) -> int:
    differ = 0
    for folder in sorted(p for p in a.iterdir() if p.is_dir() and not p.name.startswith(".")):
        for name in FILES:
            left, right = folder / name, b / folder.name / name
            if not right.exists():
                print(f"{right}: missing")
                differ += 1
                continue
            diff = list(difflib.unified_diff(_normal(left), _normal(right), str(left), str(right), lineterm="", n=1))
            if diff:
                differ += 1
                print("\n".join(diff[:60]) + ("\n..." if len(diff) > 60 else ""))
            else:
                print(f"{folder.name}/{name}: same")
    print(f"{differ} file(s) differ")
    return 1 if differ else 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    r = sub.add_parser("run")
    r.add_argument("out", type=Path)
    r.add_argument("--src", type=Path, help="a checkout whose reporter to run (default: the installed one)")
    r.add_argument("--target", help="the run's --target (default: the tool's own, a CPU)")
    c = sub.add_parser("compare")
    c.add_argument("a", type=Path)
    c.add_argument("b", type=Path)
    args = parser.parse_args()
    if args.command == "run":
        run(args.out, args.src, args.target)
        return 0
    return compare(args.a, args.b)


if __name__ == "__main__":
    sys.exit(main())
