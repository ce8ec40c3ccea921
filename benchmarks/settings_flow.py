"""How the settings travel through one run: every function entered with the RunSettings object, by its module.

Run by hand from any checkout (it imports that checkout's package): `python benchmarks/settings_flow.py [--src DIR]`.
Runs the demo's breast_cancer_mlp (JSON only) and records each function of the package entered with the settings
object among its arguments, then prints the stops (a module entered, consecutive entries in one module counted once),
the distinct modules, and the returns (a stop in a module the settings had already left): issue 53's "34 stops in 18 modules, 16
returns to a module already left".
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--src", default=str(Path(__file__).resolve().parents[1]), help="the checkout to measure")
    args = parser.parse_args()
    sys.path.insert(0, args.src)
    try:
        from reporter.inputs.settings import RunSettings
        from reporter.pipeline import demo
        from reporter.pipeline.stages import run
    except ImportError:  # before the split: reporter/run/
        from reporter.run import demo
        from reporter.run.pipeline import RunSettings, run

    reads: list[str] = []
    model, data = demo.ensure_model("breast_cancer_mlp", say=lambda *a: None)
    with tempfile.TemporaryDirectory() as out:
        settings = RunSettings(model=str(model), data=str(data), out=out, name="flow", formats=("json",),
                               latency_runs=2, quiet=True)

        def profile(frame, event, arg):  # a reporter function entered with the settings among its locals
            if event == "call":
                module = frame.f_globals.get("__name__", "")
                if module.startswith("reporter.") and not module.endswith(".settings") and any(
                        v is settings for v in frame.f_locals.values()):
                    reads.append(module)

        sys.setprofile(profile)
        try:
            run(settings)
        finally:
            sys.setprofile(None)
    stops = [m for i, m in enumerate(reads) if i == 0 or reads[i - 1] != m]
    seen, returns = set(), 0
    for i, m in enumerate(stops):
        if m in seen:
            returns += 1
        seen.add(m)
    print(f"{len(stops)} stops in {len(seen)} modules, {returns} returns to a module already left")
    print(" -> ".join(s.replace("reporter.", "") for s in stops))


if __name__ == "__main__":
    main()
