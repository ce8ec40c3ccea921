"""Schemes as the field writes them (issue 36): a LiteRT Quantizer recipe file as a variant (`--recipe FILE.json`),
what each model took of its weights (per op type), a recipe that quantizes nothing or almost nothing said in its
verdict, LiteRT's tensor-wise static int8 beside TensorFlow's per-tensor FIQ, and one scheme from both engines side
by side."""

import json

import numpy as np
import pytest

from conftest import load_report

# Int4 weights for fully connected layers only: on a conv net it takes one small kernel of three.
INT4_FC = [{"regex": ".*", "operation": "FULLY_CONNECTED", "algorithm_key": "min_max_uniform_quantize",
            "op_config": {"weight_tensor_config": {"num_bits": 4, "symmetric": True, "granularity": "CHANNELWISE",
                                                   "dtype": "INT"},
                          "compute_precision": "FLOAT", "explicit_dequantize": True}}]
# int8 weights for an op the model does not have: it quantizes nothing.
NOTHING = [dict(INT4_FC[0], operation="BATCH_MATMUL")]


def _coverage(tflite: bytes) -> dict:
    """Per op type, (weights stored below float32, weights): read with LiteRT's interpreter (not the flatbuffer
    reader the tool uses). A weight is a rank-2+ float, float16 or small-int tensor no op produces and no input
    feeds, reached directly or through DEQUANTIZE."""
    from ai_edge_litert.interpreter import Interpreter

    it = Interpreter(model_content=tflite)
    tensors = {t["index"]: t for t in it.get_tensor_details()}
    ops = it._get_ops_details()
    made = {int(o): op for op in ops for o in op["outputs"]}
    inputs = {d["index"] for d in it.get_input_details()}
    weighty = {np.dtype(np.float32), np.dtype(np.float16), np.dtype(np.int8), np.dtype(np.uint8),
               np.dtype(np.int16)}
    found = {}
    for op in ops:
        if op["op_name"] in ("DEQUANTIZE", "QUANTIZE"):
            continue
        seen = set()
        for i in op["inputs"]:
            i = int(i)
            if i < 0:
                continue
            if i in made:
                if made[i]["op_name"] != "DEQUANTIZE":
                    continue
                i = int(made[i]["inputs"][0])
                if i in made:
                    continue
            t = tensors.get(i)
            if t is None or i in inputs or len(t["shape"]) < 2 or i in seen:
                continue
            dtype = np.dtype(t["dtype"])
            if dtype not in weighty and "int4" not in str(dtype):
                continue
            seen.add(i)
            low, total = found.get(op["op_name"], (0, 0))
            found[op["op_name"]] = (low + int(dtype != np.float32), total + 1)
    return found


def _mcnemar(first_right, second_right) -> tuple:
    """(first right only, second right only, exact two-sided p) on paired booleans, with scipy."""
    from scipy.stats import binomtest

    b, c = int(np.sum(first_right & ~second_right)), int(np.sum(~first_right & second_right))
    return b, c, (binomtest(c, b + c, 0.5).pvalue if b + c else 1.0)


def _expected_engine(folder, arrays, tf_name: str, litert_name: str) -> tuple:
    """(better, why) for one scheme built by both engines, from LiteRT runs of the written files (see the test)."""
    import math

    from independent import predictions

    x, y = arrays["x"], arrays["y"]
    right = {n: predictions((folder / f"{n}.tflite").read_bytes(), x) == y for n in ("float", tf_name, litert_name)}
    size = {n: (folder / f"{n}.tflite").stat().st_size for n in (tf_name, litert_name)}
    acc = {n: float(np.mean(r)) for n, r in right.items()}

    def meets(n):
        _, _, p = _mcnemar(right["float"], right[n])
        return p >= 0.05 or acc[n] >= acc["float"]

    meeting = [n for n in (tf_name, litert_name) if meets(n)]
    if len(meeting) == 1:
        return meeting[0], "only_meets"
    if not meeting:
        return max((tf_name, litert_name), key=lambda n: (acc[n], -size[n])), "nearer"
    small, large = sorted((tf_name, litert_name), key=lambda n: size[n])
    if math.log2(size[large] / size[small]) > 0.1:
        return small, "cheaper"
    b, c, p = _mcnemar(right[small], right[large])  # a tie in cost: the more accurate beyond noise
    return (large if p < 0.05 and c > b else small), "cheaper"


@pytest.fixture(scope="module")
def schemes(tmp_path_factory, run_cli):
    """The digits conv net with FIQ from both engines, per-tensor from both, and two recipe files."""
    from reporter.pipeline import demo

    model, data = demo.ensure_model("digits_cnn")
    root = tmp_path_factory.mktemp("recipes")
    (root / "int4_fc.json").write_text(json.dumps(INT4_FC))
    (root / "nothing.json").write_text(json.dumps(NOTHING))
    out = root / "out"
    code = run_cli(model, data, out, "--variants", "float,fiq,static_wi8_ai8,fiq_per_tensor,"
                           "static_wi8_ai8_per_tensor", "--recipe", str(root / "int4_fc.json"), "--recipe",
                           str(root / "nothing.json"), "--formats", "json,html,md", "--name", "cnn", latency_runs=0)
    assert code == 0
    return load_report(out / "cnn"), out / "cnn", np.load(data)


@pytest.mark.slow
def test_a_recipe_file_is_a_variant_built_and_measured(schemes):
    from independent import accuracy

    report, folder, arrays = schemes
    v = report.variant("int4_fc")
    tflite = (folder / "int4_fc.tflite").read_bytes()
    assert v is not None and v.ok and v.converter == "LiteRT Quantizer"
    assert v.size_bytes == len(tflite) < report.variant("float").size_bytes
    assert v.metrics.accuracy == pytest.approx(accuracy(tflite, arrays["x"], arrays["y"]), abs=1e-9)
    assert v.tensor_types.get("int4") == 1  # the one Dense kernel
    assert report.settings.recipe == [str(folder.parent.parent / "int4_fc.json"),
                                         str(folder.parent.parent / "nothing.json")]


@pytest.mark.slow
def test_weight_coverage_per_op_type_matches_an_independent_reading(schemes):
    report, folder, _ = schemes
    for v in report.variants:
        counted = _coverage((folder / f"{v.name}.tflite").read_bytes())
        assert {op: (c.quantized, c.tensors) for op, c in v.weight_coverage.items()} == counted, v.name
    assert report.variant("float").weight_coverage["CONV_2D"].quantized == 0
    assert report.variant("fiq").weight_coverage["CONV_2D"].quantized == 2


@pytest.mark.slow
def test_recipes_that_quantize_nothing_or_almost_nothing_say_so(schemes):
    report, folder, _ = schemes
    little = report.findings.variant("int4_fc").verdict
    assert "quantized almost nothing: 1 of 3 weight tensors stored below float32" in little
    assert "CONV_2D 0 of 2, FULLY_CONNECTED 1 of 1" in little
    nothing = report.findings.variant("nothing").verdict
    assert "quantized nothing: every tensor is still float32" in nothing
    assert "0 of 3 weight tensors" in nothing
    assert "nothing" not in {t.name for t in report.findings.tradeoff if "ship" in t.picks}
    for name in ("fiq", "static_wi8_ai8"):  # schemes that take every weight say nothing of it
        assert "quantized" not in report.findings.variant(name).verdict
    assert "Weights stored below float32" in (folder / "report.html").read_text()


@pytest.mark.slow
def test_litert_tensorwise_static_int8_has_one_scale_per_weight_tensor(schemes):
    from test_per_tensor import _weight_scales

    report, folder, _ = schemes
    scales = _weight_scales((folder / "static_wi8_ai8_per_tensor.tflite").read_bytes())
    assert scales and set(scales) == {1}
    assert max(_weight_scales((folder / "static_wi8_ai8.tflite").read_bytes())) > 1
    assert report.variant("static_wi8_ai8_per_tensor").ok


@pytest.mark.slow
def test_one_scheme_from_both_engines_side_by_side(schemes):
    from independent import predictions

    report, folder, arrays = schemes
    pairs = {(p.tf, p.litert): p for p in report.engines}
    assert set(pairs) == {("fiq", "static_wi8_ai8"), ("fiq_per_tensor", "static_wi8_ai8_per_tensor")}
    fiq = pairs[("fiq", "static_wi8_ai8")]
    a = predictions((folder / "fiq.tflite").read_bytes(), arrays["x"])
    b = predictions((folder / "static_wi8_ai8.tflite").read_bytes(), arrays["x"])
    assert fiq.agreement == pytest.approx(float(np.mean(a == b)), abs=1e-12)
    # LiteRT's static int8 takes and gives int8: TF's FIQ quantizes its float input and dequantizes its output
    assert fiq.op_differences == {"DEQUANTIZE": [1, 0], "QUANTIZE": [1, 0]}
    # Which engine's model the report prefers, recomputed from the two files and float's run here: the one that
    # meets the accuracy target (not worse than float beyond noise, exact McNemar); of two that meet it the cheaper
    # (no timing in this run: size in doublings, a tenth of a doubling apart is a tie, which goes to the more
    # accurate beyond noise, then the smaller); of two that miss it the nearer to float.
    choice = next(c for c in report.findings.engines if c.tf == "fiq")
    assert (choice.better, choice.why) == _expected_engine(folder, arrays, "fiq", "static_wi8_ai8")
    html = (folder / "report.html").read_text()
    assert "One scheme, two engines" in html and "same prediction on" in html
    assert "One scheme, two engines" in (folder / "summary.md").read_text()


@pytest.mark.parametrize("content, problem", [
    ("not json", "is not JSON"),
    ("[]", "expected a non-empty JSON list"),
    ('[{"regex": ".*", "operation": "*", "algorithm_key": "bogus", "op_config": {}}]', "LiteRT Quantizer refuses it"),
    ('[{"regex": "(", "operation": "*", "algorithm_key": "no_quantize"}]', "regex does not compile"),
])
def test_a_bad_recipe_file_is_one_line_naming_it(tmp_path, capsys, mlp_files, run_cli, content, problem):
    model, data = mlp_files
    recipe = tmp_path / "mine.json"
    recipe.write_text(content)
    out = tmp_path / "out"
    assert run_cli(model, data, out, "--recipe", str(recipe), quiet=True) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and str(recipe) in err[0] and problem in err[0]
    assert not out.exists() or not any(out.iterdir())  # nothing written


def test_a_recipe_named_like_a_built_in_variant_is_refused(tmp_path, capsys, mlp_files, run_cli):
    model, data = mlp_files
    recipe = tmp_path / "fiq.json"
    recipe.write_text(json.dumps(INT4_FC))
    assert run_cli(model, data, tmp_path / "out", "--recipe", str(recipe)) == 2
    assert "built-in name" in capsys.readouterr().err


@pytest.mark.slow
def test_a_batch_file_names_recipes_beside_itself(tmp_path, mlp_files):
    from reporter.cli import main

    model, data = mlp_files
    (tmp_path / "recipes").mkdir()
    (tmp_path / "recipes" / "int4_fc.json").write_text(json.dumps(INT4_FC))
    config = tmp_path / "q.toml"
    config.write_text(f'[defaults]\nlatency_runs = 2\nformats = ["json"]\nvariants = ["float", "drq"]\n'
                      f'recipe = ["recipes/int4_fc.json"]\n\n[[model]]\nname = "mlp"\npath = "{model}"\n'
                      f'data = "{data}"\n')
    out = tmp_path / "out"
    assert main(["batch", str(config), "--out", str(out), "--jobs", "1", "--quiet"]) == 0
    report = load_report(out / "mlp")
    v = report.variant("int4_fc")
    assert v.ok and v.tensor_types.get("int4") == 3  # the MLP's three Dense kernels
