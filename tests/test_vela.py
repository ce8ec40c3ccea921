"""Vela's figures read from the files Vela writes (reporter/measure/vela.py), on output recorded from the pinned
Vela (tests/fixtures/vela-5.2: a small int8 CNN wholly on the NPU and its dynamic-range twin wholly on the CPU, each
with the model given, the compiled model, the summary CSV and what Vela printed). Checked against the files read
here with TensorFlow's flatbuffer tools and the csv module, and against Vela's own printed counts."""

import csv
import io
import re
from pathlib import Path

import pytest

from reporter.measure import vela

RECORDED = Path(__file__).parent / "fixtures" / "vela-5.2"


def _recorded(name: str) -> dict:
    return {"model": (RECORDED / f"{name}.tflite").read_bytes(),
            "compiled": (RECORDED / f"{name}_vela.tflite").read_bytes(),
            "summary": (RECORDED / f"{name}_summary.csv").read_text(),
            "output": (RECORDED / f"{name}_output.txt").read_text()}


def _ops(path: Path) -> list[str]:
    from tensorflow.lite.tools import flatbuffer_utils

    model = flatbuffer_utils.read_model(str(path))
    names = []
    for op in model.subgraphs[0].operators:
        code = model.operatorCodes[op.opcodeIndex]
        names.append(code.customCode.decode() if code.customCode else str(max(code.builtinCode,
                                                                              code.deprecatedBuiltinCode)))
    return names


def _row(name: str) -> dict:
    (row,) = list(csv.DictReader(io.StringIO((RECORDED / f"{name}_summary.csv").read_text())))
    return row


def test_a_model_wholly_on_the_npu():
    r = _recorded("int8")
    found = vela.figures(r["model"], r["compiled"], r["summary"], r["output"], "ethos-u55-128")
    assert _ops(RECORDED / "int8_vela.tflite") == ["ethos-u"]
    assert (found.npu_ops, found.cpu_ops, found.cpu) == (len(_ops(RECORDED / "int8.tflite")), 0, [])
    assert found.npu_share == 1.0
    row = _row("int8")
    assert found.inference_ms == pytest.approx(float(row["inference_time"]) * 1000, rel=1e-12)
    assert found.sram_kib == pytest.approx(float(row["sram_memory_used"]), rel=1e-12)
    assert found.flash_kib == pytest.approx(float(row["off_chip_flash_memory_used"]), rel=1e-12)
    assert found.clock_mhz == pytest.approx(float(row["core_clock"]) / 1e6)
    # Vela warned about three shape ops it then folded away: they are not CPU ops
    assert "operator: SHAPE" in r["output"] and "CPU operators = 0" in r["output"]


def test_a_model_left_on_the_cpu_with_vela_s_reasons():
    r = _recorded("drq")
    found = vela.figures(r["model"], r["compiled"], r["summary"], r["output"], "ethos-u55-128")
    printed = int(re.search(r"CPU operators = (\d+)", r["output"]).group(1))
    assert found.cpu_ops == printed == len(_ops(RECORDED / "drq_vela.tflite")) and found.npu_ops == 0
    warnings = dict((tensor, (op, reason)) for op, tensor, reason in
                    re.findall(r"operator: (\S+), ofm: '(.*)'\nReason: (.*)", r["output"]))
    assert {c.tensor: (c.op, c.reason) for c in found.cpu} == warnings


def test_a_cpu_op_vela_gave_no_reason_for_says_so():
    r = _recorded("drq")
    output = re.sub(r"Warning \(supported operators\) operator: SOFTMAX.*?\nReason: .*?\n", "", r["output"], flags=re.S)
    found = vela.figures(r["model"], r["compiled"], r["summary"], output, "ethos-u55-128")
    softmax = [c for c in found.cpu if c.op == "SOFTMAX"]
    assert len(softmax) == 1 and softmax[0].reason == vela.NO_REASON and found.cpu_ops == 7


@pytest.mark.parametrize("column", ["inference_time", "sram_memory_used"])
def test_a_summary_without_a_column_is_one_clear_error(column):
    r = _recorded("int8")
    rows = list(csv.reader(io.StringIO(r["summary"])))
    keep = [i for i, name in enumerate(rows[0]) if name != column]
    text = "\n".join(",".join(row[i] for i in keep) for row in rows) + "\n"
    with pytest.raises(vela.ToolOutputError) as error:
        vela.figures(r["model"], r["compiled"], text, r["output"], "ethos-u55-128")
    said = str(error.value)
    assert f"Vela {vela.version()}" in said and column in said and "\n" not in said
