"""The batch on Ray (a local Ray instance): the same index and exit code as the local executor, a broken
model and a killed task become failure entries, and the reports land in --out without a shared file
system (the tasks return their files)."""

import json

import pytest

from reporter.cli import main

pytestmark = pytest.mark.slow

KILLER = '''
import os
import signal


def load():
    os.kill(os.getpid(), signal.SIGKILL)  # the task's process dies, as it would out of memory
'''


@pytest.fixture(scope="module")
def config(mlp_files, tmp_path_factory):
    pytest.importorskip("ray")
    root = tmp_path_factory.mktemp("ray_batch")
    (root / "broken.keras").write_text("not a model")
    (root / "killer_data.py").write_text(KILLER)
    model, data = mlp_files
    path = root / "batch.toml"
    path.write_text(
        '[defaults]\nformats = ["json", "md"]\nlatency_runs = 3\nvariants = ["float", "fiq"]\n\n'
        f'[[model]]\nname = "mlp"\npath = "{model}"\ndata = "{data}"\n\n'
        f'[[model]]\nname = "broken"\npath = "broken.keras"\ndata = "{data}"\n\n'
        f'[[model]]\nname = "killed"\npath = "{model}"\ndata = "killer_data:load"\n')
    return root, path


def _batch(path, out, *extra) -> tuple[int, dict]:
    code = main(["batch", str(path), "--out", str(out), "--jobs", "2", "--quiet", *extra])
    return code, {row["name"]: row for row in json.loads((out / "index.json").read_text())["rows"]}


def test_ray_gives_the_local_executors_index_and_exit_code(config):
    root, path = config
    local_code, local = _batch(path, root / "local")
    ray_code, on_ray = _batch(path, root / "ray", "--executor", "ray")
    assert ray_code == local_code == 1  # a model failed
    assert set(on_ray) == set(local) == {"mlp", "broken", "killed"}
    for name in local:
        assert on_ray[name]["status"] == local[name]["status"], name
    assert on_ray["mlp"]["status"] == "ok" and on_ray["mlp"]["accuracy"] == local["mlp"]["accuracy"]
    assert on_ray["broken"]["stage"] == local["broken"]["stage"] == "start"  # its file refused before loading
    assert "not a Keras 3 .keras file" in on_ray["broken"]["error"]
    assert (root / "ray" / on_ray["broken"]["log"]).is_file()  # the task's log came back with it
    # The killed task is a failure entry on both executors, not a crashed batch.
    assert on_ray["killed"]["status"] == local["killed"]["status"] == "failed"
    assert "Ray task died" in on_ray["killed"]["error"] and "SIGKILL" in local["killed"]["error"]
    # The report's files came back from the task: same report as the local run, apart from the times.
    ray_report = json.loads((root / "ray" / "mlp" / "report.json").read_text())
    local_report = json.loads((root / "local" / "mlp" / "report.json").read_text())
    for key in ("model", "dataset", "layers"):
        assert ray_report[key] == local_report[key], key
    assert sorted(p.name for p in (root / "ray" / "mlp").iterdir()) == \
        sorted(p.name for p in (root / "local" / "mlp").iterdir())
    assert not list((root / "ray").glob(".*partial*"))  # nothing half-written


def test_ray_resume_skips_the_complete_report(config):
    root, path = config
    code, rows = _batch(path, root / "ray", "--executor", "ray", "--resume")
    assert rows["mlp"]["status"] == "skipped" and code == 1


def test_the_ray_executor_without_ray_says_how_to_install_it(config, monkeypatch, capsys):
    import builtins

    root, path = config
    real_import = builtins.__import__

    def no_ray(name, *args, **kwargs):
        if name == "ray" or name.startswith("ray."):
            raise ImportError("No module named 'ray'")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_ray)
    code = main(["batch", str(path), "--out", str(root / "none"), "--executor", "ray", "--quiet"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and err == ['quant-report: error: the Ray executor needs Ray: pip install "quant-report[ray]"']
    assert not (root / "none").exists()


def test_the_batch_table_chooses_the_executor_and_bad_values_are_named(tmp_path, mlp_files):
    from reporter.batch.config import ConfigError, load

    model, data = mlp_files
    entry = f'[[model]]\nname = "mlp"\npath = "{model}"\ndata = "{data}"\n'
    good = tmp_path / "good.toml"
    good.write_text(f'[batch]\nexecutor = "ray"\ncpus_per_task = 2\n\n{entry}')
    assert load(good).batch == {"executor": "ray", "cpus_per_task": 2}
    bad = tmp_path / "bad.toml"
    bad.write_text(f'[batch]\nexecutor = "spark"\n\n{entry}')
    with pytest.raises(ConfigError) as info:
        load(bad)
    assert any("bad.toml:2: 'executor' must be 'local' or 'ray'" in p for p in info.value.problems)
