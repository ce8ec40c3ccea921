"""A target's own tool keeps its figures in `on_target.tools` by the tool's name: each tool's record registered once
(reporter.model.hardware.register) and decoded with its bounds, its cell laid out by its render module
(reporter.render.tools.register), with no view or record of the core naming it; report.json files written with
the old per-tool fields (`on_target.vela`, `.micro`) still read and are written in the new form."""

from __future__ import annotations

import json
from dataclasses import dataclass

import pytest

from reporter.cli import main
from reporter.model import hardware
from reporter.model.bounds import COUNT, figure

from conftest import FIXTURE_REPORT

VELA = {"config": "ethos-u55-128", "npu_ops": 5, "cpu_ops": 0, "sram_kib": 1.5, "flash_kib": 2.0,
        "inference_ms": 0.01, "clock_mhz": 500.0}


def _with_on_target(tmp_path, target: str, on_target: dict) -> tuple:
    """The fixture report for `target`, its second model checked there as `on_target` says; findings dropped (derived
    again when read)."""
    report = json.loads(FIXTURE_REPORT.read_text())
    report["settings"]["target"] = target
    report.pop("findings", None)
    name = report["variants"][1]["name"]
    report["variants"][1]["on_target"] = {"target": target, "kernels": "LiteRT's reference kernels", "runs": True,
                                          **on_target}
    path = tmp_path / "report.json"
    path.write_text(json.dumps(report))
    return path, name


def _markdown(tmp_path, path) -> str:
    assert main(["render", str(path), "--format", "md", "--out", str(tmp_path / "s.md")]) == 0
    return (tmp_path / "s.md").read_text()


def test_an_old_report_json_with_vela_figures_reads_and_is_written_with_them_by_tool(tmp_path):
    from reporter.pipeline.conclude import report_from_json

    path, name = _with_on_target(tmp_path, "ethos-u55-128", {"vela": VELA, "micro": None})
    text = path.read_text()
    report = report_from_json(text)
    assert path.read_text() == text  # read, not rewritten
    on = report.variant(name).on_target
    assert isinstance(on.tools["vela"], hardware.VelaFigures) and on.tools["vela"].npu_ops == VELA["npu_ops"]
    written = json.loads(report.to_json())
    stored = next(v for v in written["variants"] if v["name"] == name)["on_target"]
    assert stored["tools"] == {"vela": {**VELA, "cpu": [], "system_config": "", "host_ops": 0}}
    assert "vela" not in stored and "micro" not in stored
    md = _markdown(tmp_path, path)  # the figures, laid out by Vela's render module, from the old form
    assert "5 of 5 ops on the NPU" in md and "SRAM 1.5 KiB" in md and "flash 2.0 KiB" in md


@dataclass(frozen=True)
class SimFigures:
    """A simulator's figures for a model: the cycles it counted."""

    cycles: int = figure(COUNT)


@pytest.fixture
def simulator():
    """A tool added from outside the package: its record and its words, registered for the test only."""
    from reporter.render import tools

    class SimWords(tools.ToolWords):
        def cell(self, figures) -> str:
            return f"{figures.cycles:,} simulated cycles"

    hardware.register("npusim", SimFigures)
    tools.register("npusim", SimWords())
    yield
    hardware.unregister("npusim")
    tools.unregister("npusim")


def test_a_tool_added_from_outside_brings_its_record_bounds_and_cell(tmp_path, capsys, simulator):
    path, name = _with_on_target(tmp_path, "int8", {"tools": {"npusim": {"cycles": 123456}}})
    md = _markdown(tmp_path, path)
    assert "123,456 simulated cycles" in md
    capsys.readouterr()
    bad, _ = _with_on_target(tmp_path, "int8", {"tools": {"npusim": {"cycles": -7}}})
    assert main(["render", str(bad), "--format", "md", "--out", str(tmp_path / "bad.md")]) == 1
    err = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    assert len(err) == 1 and "on_target.tools.npusim.cycles is -7" in err[0], err
    assert not (tmp_path / "bad.md").exists()


def test_the_host_ops_beside_integer_hardware_are_what_the_kinds_declare():
    import reporter.measure.kinds  # noqa: F401 - the built-in kinds, registered as a run registers them
    from reporter.core.targets import rules

    assert "TFLite_Detection_PostProcess" in rules.HOST_OPS  # the detection kind's own declaration
    assert rules.on_host({"MY_HOST_NMS": 1}) == ""
    rules.add_host_ops("MY_HOST_NMS")
    try:
        assert rules.on_host({"MY_HOST_NMS": 1, "DEQUANTIZE": 2}) == \
            "the postprocess (MY_HOST_NMS) runs on the host CPU (with 2 DEQUANTIZE ops)"
    finally:
        rules.HOST_OPS.discard("MY_HOST_NMS")
