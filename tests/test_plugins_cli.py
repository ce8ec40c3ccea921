"""A user's plug-ins at the user's level (issue 65): a task kind in a file of one's own, loaded by `--plugin` in `run`
and in `batch` (a worker process must load it), offered by `--task` and `--help`; an installed package's plug-in
through the entry-point group `quant_report.plugins`; a report made with a plug-in renders without it as the run
wrote it (and says which plug-in made it), `diff` asks for it in one line; `reporter.testing.check_kind` / `check_target` pass on
every built-in plug-in and name the method a broken kind gets wrong.

Every command line here runs in a process of its own (`python -m reporter`), as a user runs it: a plug-in loaded in
the test process would stay registered for the tests after it. The figures are checked against top-2 accuracy
computed with scikit-learn and numpy on a plain LiteRT run of the written .tflite files (tests/independent.py)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
from sklearn import metrics as skm

from reporter.core import targets, tasks
from reporter.measure.scoring import Score

# The kind of one's own, written by the test into its folder: a classifier judged by top-2 accuracy (a sample is
# right when its label is among the two highest scores; ties as scikit-learn's top_k_accuracy_score breaks them).
KIND = '''
"""A user's task kind: top-2 accuracy."""
import dataclasses

import numpy as np

from reporter.measure.kinds import register
from reporter.measure.kinds.classification import Classification
from reporter.measure.task import columns


class TopTwo(Classification):
    name = "top2"
    words = "a top-2 classifier"
    main_metric = "top-2 accuracy"
    accuracy_label = share_metric = "Top-2 accuracy"

    def correct(self, task, out, y):
        best = np.argsort(columns(out), axis=1, kind="stable")[:, ::-1][:, :2]
        return np.any(best == np.asarray(y)[:, None], axis=1) & np.isfinite(columns(out)).all(axis=1)

    def metrics(self, task, y, out, float_out):
        found = super().metrics(task, y, out, float_out)
        return dataclasses.replace(found, accuracy=float(np.mean(task.correct(out, y))))


register(TopTwo())
'''
VARIANTS = "float,fiq"


def _cli(*args, cwd, env=None, timeout=900) -> subprocess.CompletedProcess:
    """`python -m reporter ARGS` in a process of its own, as a user runs it."""
    return subprocess.run([sys.executable, "-m", "reporter", *map(str, args)], cwd=cwd, capture_output=True,
                          text=True, timeout=timeout, env={**os.environ, **(env or {})})


def _lines(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.strip()]


@pytest.fixture(scope="module")
def top2(demo_cache, tmp_path_factory):
    """The digits MLP (10 classes) and its data, and a folder holding the kind's file, top2_kind.py."""
    import seg_fixtures

    model, data = seg_fixtures.ensure("top2", demo_cache)
    folder = tmp_path_factory.mktemp("plugin")
    (folder / "top2_kind.py").write_text(KIND)
    return {"model": model, "data": data, "folder": folder, "kind": folder / "top2_kind.py"}


def _right(tflite: bytes, data) -> np.ndarray:
    """Per sample: the label among the two highest scores LiteRT gives (ties as scikit-learn breaks them)."""
    from independent import signature_input_order, signature_predict

    (name,) = signature_input_order(tflite)
    (scores,) = signature_predict(tflite, {name: data["x"]}).values()
    scores = np.asarray(scores, np.float64)
    best = np.argsort(scores, axis=1, kind="stable")[:, ::-1][:, :2]
    right = np.any(best == data["y"][:, None], axis=1)
    assert right.mean() == pytest.approx(skm.top_k_accuracy_score(data["y"], scores, k=2, labels=range(10)),
                                         abs=1e-12)
    return right


def _check_figures(folder: Path, data) -> dict:
    """report.json's top-2 accuracy and McNemar counts of float and fiq against LiteRT runs of their files."""
    report = json.loads((folder / "report.json").read_text())
    assert report["model"]["task"] == "top2" and report["model"]["main_metric"] == "top-2 accuracy"
    measured = {v["name"]: v["metrics"] for v in report["variants"]}
    right = {name: _right((folder / f"{name}.tflite").read_bytes(), data) for name in ("float", "fiq")}
    for name, ok in right.items():
        assert measured[name]["accuracy"] == pytest.approx(float(np.mean(ok)), abs=1e-12), name
    assert measured["fiq"]["paired"]["float"] == {"reference_only": int(np.sum(right["float"] & ~right["fiq"])),
                                                  "variant_only": int(np.sum(~right["float"] & right["fiq"]))}
    return report


@pytest.fixture(scope="module")
def top2_run(top2):
    """`quant-report run ... --plugin top2_kind.py --task top2`, from the kind's folder (the path as typed)."""
    out = top2["folder"] / "out"
    done = _cli("run", top2["model"], "--data", top2["data"], "--plugin", "top2_kind.py", "--task", "top2",
                "--variants", VARIANTS, "--formats", "json,md", "--latency-runs", "0", "--out", out, "--name", "m",
                "--quiet", cwd=top2["folder"])
    return done, out / "m"


@pytest.mark.slow
def test_a_kind_from_a_file_runs_with_plugin_and_measures_what_litert_and_numpy_say(top2, top2_run):
    done, folder = top2_run
    assert done.returncode == 0, done.stderr[-3000:]
    report = _check_figures(folder, np.load(top2["data"]))
    assert report["settings"]["plugin"] == ["top2_kind.py"]  # what `render` names when the plug-in is missing
    summary = (folder / "summary.md").read_text()
    assert "Measured as a top-2 classifier (as --task top2 says" in summary, summary[:2000]


@pytest.mark.slow
def test_its_report_renders_without_the_plugin_as_the_run_wrote_it_and_diff_asks_for_it(top2, top2_run, tmp_path):
    """Without the plug-in, `render` shows the report from what report.json stores (the kind's words, figures and
    verdicts as the run wrote them: the same summary.md), never as another kind, and says once which plug-in made it;
    `diff`, which compares kinds, asks for it in one line."""
    done, folder = top2_run
    assert done.returncode == 0, done.stderr[-3000:]
    without = _cli("render", folder / "report.json", "--format", "md", "--out", tmp_path / "a.md", cwd=tmp_path)
    assert without.returncode == 0, without.stderr
    (line,) = _lines(without.stderr)
    assert "task kind 'top2'" in line and "--plugin top2_kind.py" in line, line
    assert (tmp_path / "a.md").read_text() == (folder / "summary.md").read_text()
    assert "a classifier (" not in (tmp_path / "a.md").read_text()
    refused = _cli("diff", folder, folder, cwd=tmp_path)
    assert refused.returncode == 2, refused.stdout[-500:]
    (line,) = _lines(refused.stderr)
    assert "task kind 'top2'" in line and "--plugin top2_kind.py" in line and "Traceback" not in refused.stderr
    # with it (a path from here), the report reads as the kind it was made with
    again = _cli("render", folder / "report.json", "--format", "md", "--out", tmp_path / "b.md",
                 "--plugin", top2["kind"], cwd=tmp_path)
    assert again.returncode == 0, again.stderr
    text = (tmp_path / "b.md").read_text()
    assert "Measured as a top-2 classifier" in text and "a classifier (" not in text


@pytest.mark.slow
def test_a_batch_loads_the_plugin_in_its_workers(top2, tmp_path):
    """The batch file's [defaults] `plugin` (relative to the file), two models run at once: each in a worker process,
    which must have the kind to accept `task = ["top2"]` and to measure it."""
    batch = tmp_path / "batch"
    batch.mkdir()
    (batch / "top2_kind.py").write_text(KIND)
    (batch / "batch.toml").write_text(textwrap.dedent(f"""
        [defaults]
        plugin = ["top2_kind.py"]
        task = ["top2"]
        variants = ["float", "fiq"]
        latency_runs = 0
        formats = ["json"]

        [[model]]
        name = "one"
        path = "{top2['model']}"
        data = "{top2['data']}"

        [[model]]
        name = "two"
        path = "{top2['model']}"
        data = "{top2['data']}"
        """))
    done = _cli("batch", batch / "batch.toml", "--out", tmp_path / "out", "--jobs", "2", "--quiet", cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    data = np.load(top2["data"])
    for name in ("one", "two"):
        report = _check_figures(tmp_path / "out" / name, data)
        assert report["settings"]["plugin"] == [str((batch / "top2_kind.py").resolve())]


def test_a_batch_files_plugin_keys_are_read_relative_to_it_with_their_lines(tmp_path):
    from reporter.batch.config import plugins_of

    (tmp_path / "kinds").mkdir()
    config = tmp_path / "b.toml"
    config.write_text('[defaults]\nplugin = ["kinds/a.py", "some.module"]\n\n[[model]]\npath = "m.keras"\n'
                      'data = "d.npz"\nplugin = ["b.py"]\n')
    assert plugins_of(config) == [(str(tmp_path / "kinds" / "a.py"), f"{config}:2"), ("some.module", f"{config}:2"),
                                  (str(tmp_path / "b.py"), f"{config}:7")]


def test_help_lists_the_plugins_kind_and_task_accepts_it(top2):
    with_it = _cli("run", "--plugin", "top2_kind.py", "--help", cwd=top2["folder"])
    without = _cli("run", "--help", cwd=top2["folder"])
    assert with_it.returncode == 0 and without.returncode == 0, with_it.stderr + without.stderr
    task_help = " ".join(with_it.stdout.rsplit("--task [OUTPUT=]KIND", 1)[1].split("--metric", 1)[0].split())
    assert task_help.endswith(f"KIND: {', '.join(tasks.names())}, top2)"), task_help
    assert "top2" not in without.stdout
    refused = _cli("run", "m.keras", "--data", "d.npz", "--task", "top2", cwd=top2["folder"])
    (line,) = _lines(refused.stderr)
    assert refused.returncode == 2 and line.startswith("quant-report run: error: argument --task:"), line


@pytest.mark.parametrize("plugin, said", [
    ("missing_kind.py", "missing_kind.py: no such file"),
    ("no_such_module_anywhere", "no_such_module_anywhere: no module named 'no_such_module_anywhere'"),
    ("raises.py", "raises.py: could not be imported: RuntimeError: my kind broke"),
    ("exits.py", "exits.py: the plug-in called sys.exit(3)"),
])
def test_a_plugin_that_cannot_be_loaded_is_one_line_naming_it(plugin, said, tmp_path):
    (tmp_path / "raises.py").write_text("raise RuntimeError('my kind broke')\n")
    (tmp_path / "exits.py").write_text("import sys\nsys.exit(3)\n")
    for command in (["run", "m.keras", "--data", "d.npz"], ["render", "r.json", "--format", "md"]):
        done = _cli(*command, "--plugin", plugin, cwd=tmp_path)
        assert done.returncode == 2, done.stderr
        (line,) = _lines(done.stderr)
        assert line.startswith(f"quant-report {command[0]}: error: argument --plugin: {said}"), line


def test_a_batch_files_plugin_that_cannot_be_loaded_names_the_file_and_line(tmp_path):
    (tmp_path / "b.toml").write_text('[[model]]\npath = "m.keras"\ndata = "d.npz"\nplugin = ["gone.py"]\n')
    done = _cli("batch", "b.toml", "--out", "out", cwd=tmp_path)
    (line,) = _lines(done.stderr)
    assert done.returncode == 2, done.stderr
    assert line == f"quant-report: error: b.toml:4: plugin {tmp_path / 'gone.py'}: no such file", line


def test_the_api_names_a_plugin_that_cannot_be_loaded(tmp_path):
    import reporter

    with pytest.raises(reporter.QuantReportError) as caught:
        reporter.run(tmp_path / "m.keras", tmp_path / "d.npz", plugins=[tmp_path / "gone.py"])
    assert str(caught.value) == f"plugins: {tmp_path / 'gone.py'}: no such file"


def test_an_installed_packages_plugin_is_loaded_and_a_broken_one_warned_about(tmp_path):
    """A distribution on the path (its .dist-info with entry_points.txt, as pip installs one) declaring two plug-ins in
    `quant_report.plugins`: the working one's kind is offered by --task; the one that fails is one warning line and the
    command goes on."""
    dist = tmp_path / "site" / "my_kinds-1.0.dist-info"
    dist.mkdir(parents=True)
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: my-kinds\nVersion: 1.0\n")
    (dist / "entry_points.txt").write_text("[quant_report.plugins]\ntop2 = my_top2_kind\n"
                                           "broken = my_missing_kinds:setup\n")
    (tmp_path / "site" / "my_top2_kind.py").write_text(KIND)
    done = _cli("run", "--help", cwd=tmp_path, env={"PYTHONPATH": str(tmp_path / "site")})
    assert done.returncode == 0, done.stderr
    assert "top2)" in " ".join(done.stdout.split()), done.stdout[-2000:]
    (line,) = _lines(done.stderr)
    assert line.startswith("quant-report: warning: the plug-in broken (my_missing_kinds:setup, entry point of"
                           " quant_report.plugins) was not loaded: could not be imported: ModuleNotFoundError"), line


def test_a_report_of_a_kind_no_plugin_registers_is_never_read_as_a_classifier(tmp_path, capfd):
    """report.json names a kind nothing here registers (and no --plugin): `render` shows it as that kind's stand-in
    (its name and main metric as recorded, never a classifier's words) and says once which plug-in it needs."""
    from conftest import FIXTURE_REPORT
    from reporter.cli import main
    from reporter.model.report import Report

    data = json.loads(FIXTURE_REPORT.read_text())
    data["model"]["task"] = "someone_elses_kind"
    data["model"]["main_metric"] = "their score"
    data.pop("findings")
    path = tmp_path / "report.json"
    path.write_text(json.dumps(data))
    capfd.readouterr()
    assert main(["render", str(path), "--format", "md", "--out", str(tmp_path / "s.md")]) == 0
    (line,) = _lines(capfd.readouterr().err)
    assert line == (f"quant-report: note: {path}: made with the task kind 'someone_elses_kind', which no plug-in"
                    " loaded here registers, and the run recorded no --plugin (an installed package's or one"
                    " registered through the Python API): load the module that registers it with --plugin"), line
    kind = Report.from_json(path.read_text()).model.task_kind
    assert isinstance(kind, tasks.Unloaded) and kind.name == "someone_elses_kind"
    assert kind.accuracy_label == "Their score" and not any(kind is k for k in tasks.kinds())
    text = (tmp_path / "s.md").read_text()
    assert "Their score" in text and "a classifier (" not in text


# --- the shipped conformance checks -----------------------------------------------------------------------------
@pytest.mark.parametrize("name", [k.name for k in tasks.kinds()])
def test_check_kind_passes_on_every_built_in_kind(name):
    from reporter.testing import check_kind

    check_kind(tasks.of(name))


@pytest.mark.parametrize("family", targets.FAMILIES, ids=lambda f: f.__name__.rpartition(".")[2])
def test_check_target_passes_on_every_built_in_target_family(family):
    from reporter.testing import check_target

    check_target(family)


def _user_kind(tmp_path):
    """The KIND above, imported from a file as a user's module (not registered)."""
    import importlib.util

    source = KIND.replace("register(TopTwo())", "")
    (tmp_path / "user_top2.py").write_text(source)
    spec = importlib.util.spec_from_file_location("user_top2", tmp_path / "user_top2.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.TopTwo


def test_check_kind_passes_on_a_users_kind_and_leaves_the_registry_as_it_was(tmp_path):
    from reporter.testing import check_kind

    before = tasks.kinds()
    try:
        check_kind(_user_kind(tmp_path)())
    finally:
        assert tasks.kinds() == before


@pytest.mark.parametrize("broken, method, said", [
    ({"agreement": lambda self, task, out, ref: np.full(len(out), 2.0)}, "agreement()", "must be in 0..1"),
    ({"metrics": lambda self, task, y, out, f: __import__("reporter.model.report", fromlist=["Metrics"]).Metrics(
        accuracy=float("nan"))}, "metrics()", "returned nan as accuracy"),
    ({"score": lambda self, task, y: Score(task, y, "another metric")}, "score()",
     "names 'another metric', not the declared main_metric 'top-2 accuracy'"),
    ({"correct": lambda self, task, out, y: np.ones(len(out) - 1, bool)}, "correct()", "returned 39 rows for 40"),
    ({"recognise": lambda self, labels, port, threshold, made_by="": (_ for _ in ()).throw(ValueError("no"))},
     "recognise()", "raised ValueError (no)"),
], ids=["agreement", "metrics", "score", "correct", "recognise"])
def test_check_kind_names_the_method_a_broken_kind_gets_wrong(broken, method, said, tmp_path):
    from reporter.testing import check_kind

    kind = type("Broken", (_user_kind(tmp_path),), {"name": "broken", **broken})()
    with pytest.raises(AssertionError) as caught:
        check_kind(kind)
    message = str(caught.value)
    assert message.startswith(f"kind broken: {method}: ") and said in message, message
    assert "broken" not in tasks.names()
