"""Keypoint models (heatmaps, coordinates) read from `y_keypoints` with no flag, judged by PCK@0.1 and OKS.

The expectations are computed here, independently: tests/keypoint_fixtures.py runs each written .tflite with plain
LiteRT (one image per invoke), decodes the keypoints itself and computes PCK@0.1 and OKS with loops over images."""

import json

import numpy as np
import pytest

import keypoint_fixtures as KF
from conftest import load_report, measured_models, one_error_line, run_recorded

FLAGS = ("--variants", "float,fiq,int8_io", "--latency-runs", "0", "--formats", "json,md,html")


@pytest.fixture(scope="module")
def runs(demo_cache, tmp_path_factory):
    """run(case): (exit code or the error, the report folder, the data file) of one quant-report run, once each."""
    done = {}

    def run(case: str):
        if case not in done:
            out = tmp_path_factory.mktemp(case)
            if case == "heatmaps":  # y_keypoints and no flag
                model, data = KF.ensure("heatmaps", demo_cache)
                flags = FLAGS
            else:  # the coordinates model, its labels as the one array `y`: read as keypoints by --task
                model, given = KF.ensure("coordinates", demo_cache)
                d = np.load(given)
                data = out / "data.npz"
                np.savez(data, x=d["x"], y=d["y_keypoints"], x_calib=d["x_calib"])
                flags = (*FLAGS, "--task", "keypoints")
            code, error = run_recorded(model, data, out, case, *flags)
            done[case] = (code if error is None else error), out / case, data
        return done[case]

    return run


def _checked_against_litert(folder, data_path, labels: str) -> dict:
    """Every measured model's PCK@0.1, mean OKS and PCK per keypoint in report.json against the reference on a plain
    LiteRT run of its written file; returns {model: the reference's figures}."""
    report = json.loads((folder / "report.json").read_text())
    data = np.load(data_path)
    x, y = data["x"], data[labels]
    found = {}
    for name, v in measured_models(report, ok_only=True).items():
        expected = KF.figures(KF.decoded(KF.outputs((folder / f"{name}.tflite").read_bytes(), x)), y)
        mine = v["metrics"]["figures"]["keypoints"]
        assert mine["pck"] == pytest.approx(expected["pck"], abs=1e-12), name
        assert mine["oks"] == pytest.approx(expected["oks"], rel=1e-6), name
        assert mine["pck_per_keypoint"] == pytest.approx(expected["pck_per_keypoint"], abs=1e-12), name
        main = v["metrics"]["main"]
        assert main["name"] == "PCK@0.1" and main["value"] == pytest.approx(expected["pck"], abs=1e-12), name
        found[name] = expected
    assert {"float", "fiq", "int8_io"} <= set(found)
    fiq = report["variants"][[v["name"] for v in report["variants"]].index("fiq")]["metrics"]["main"]
    assert fiq["paired"]["float"]["delta"] == pytest.approx(found["fiq"]["pck"] - found["float"]["pck"], abs=1e-12)
    return found


@pytest.mark.slow
def test_the_first_run_with_y_keypoints_and_no_flags_reads_a_keypoint_model(runs):
    code, folder, _ = runs("heatmaps")
    assert code == 0, code
    report = load_report(folder)
    assert report.model.task == "keypoints" and report.model.num_classes == KF.K
    assert report.metric() == ("PCK@0.1", True)
    md = (folder / "summary.md").read_text()
    assert "Measured as a keypoint model" in md and "y_keypoints" in md and "equal sigmas of 0.05" in md, md[:2000]
    assert "| Variant | PCK@0.1 |" in md


@pytest.mark.slow
def test_every_variants_pck_and_oks_equal_numpy_on_a_litert_run_of_its_heatmap_file(runs):
    code, folder, data = runs("heatmaps")
    assert code == 0, code
    found = _checked_against_litert(folder, data, "y_keypoints")
    assert found["float"]["pck"] > 0.95  # the fixture is a working keypoint model


@pytest.mark.slow
def test_a_coordinates_output_is_read_by_task_keypoints_and_measured_the_same_way(runs):
    code, folder, data = runs("coordinates")
    assert code == 0, code
    report = load_report(folder)
    assert report.model.task == "keypoints" and "as --task keypoints says" in report.model.task_reason
    assert "as coordinates" in report.model.task_reason
    found = _checked_against_litert(folder, data, "y")
    assert found["float"]["pck"] > 0.95


@pytest.mark.slow
def test_the_keypoint_report_round_trips_and_renders_without_tensorflow(runs):
    from reporter.pipeline.conclude import report_from_json
    from reporter.render import formats

    code, folder, _ = runs("heatmaps")
    assert code == 0, code
    report = report_from_json((folder / "report.json").read_text())
    assert report_from_json(report.to_json()) == report
    html = formats.render(report, "html").decode().replace("&#64;", "@")
    rows = ("PCK@0.1 (within 0.1 of the figure", "Mean OKS", "Per keypoint (σ: its OKS sigma): PCK@0.1", "(σ 0.050)")
    for row in rows:
        assert row in html, row


@pytest.mark.slow
def test_keypoint_labels_that_do_not_fit_the_output_are_refused_in_one_line(demo_cache, tmp_path, capfd):
    from conftest import run_cli

    model, given = KF.ensure("heatmaps", demo_cache)
    d = np.load(given)
    data = tmp_path / "four.npz"
    np.savez(data, x=d["x"], y_keypoints=d["y_keypoints"][:, :4], x_calib=d["x_calib"])
    out = tmp_path / "out"
    capfd.readouterr()
    code = run_cli(model, data, out, "--variants", "float", "--latency-runs", "0")
    line = one_error_line(code, capfd.readouterr().err, out)
    assert "'y_keypoints'" in line and "output heatmaps" in line and "(16, 16, 5)" in line, line


# --- the kind's figures, without TensorFlow ----------------------------------------------------------------------
def _port(shape, name="out"):
    from reporter.measure.signature import Port

    return Port(name, "output_0", 0, (-1, *shape), "float32", allocated=(1, *shape))


def _read(y, shape, joined=True, name="out"):
    """The reading of labels `y` for an output of `shape`: given as y_keypoints (what bind_labels hands on) or as
    the one array y."""
    from reporter.core import tasks
    from reporter.measure.kinds.base import LabelSource
    from reporter.measure.kinds.reading import read_task

    port = _port(shape, name)
    if joined:
        y = tasks.of("keypoints").join_labels({"keypoints": (y, False)}, port, "d.npz")
    return read_task(LabelSource(y, False, "d.npz", "y"), port, "LOGISTIC")


def test_an_array_y_of_keypoints_is_read_as_keypoints_only_as_y_keypoints():
    """y_keypoints is read as keypoints; the same values as the one array `y` are read as before (refused here:
    the heatmap fixture of the user's --metric depends on it), and other label arrays are not the kind's."""
    from reporter.core import tasks
    from reporter.core.errors import InputError

    y = np.random.default_rng(1).uniform(size=(6, 3, 2)).astype(np.float32)
    assert _read(y, (8, 8, 3)).task.kind.name == "keypoints"
    with pytest.raises(InputError, match="'y' has shape"):
        _read(y, (8, 8, 3), joined=False)
    kind = tasks.of("keypoints")
    assert kind.join_labels({"": (y, False)}, _port((8, 8, 3)), "d.npz") is None
    assert kind.join_labels({"keypoints": (y, False), "visible": (y, False)}, _port((8, 8, 3)), "d.npz") is None
    # an output named keypoints that is no keypoint output keeps y_keypoints as its own labels
    assert kind.join_labels({"keypoints": (y, False)}, _port((6,), "keypoints"), "d.npz") is None


def test_pck_and_oks_follow_their_definitions_coco_sigmas_flat_boxes_and_nan_included():
    """K = 17 coordinates (COCO's sigmas), images with one labelled keypoint or all on a line (the image's size),
    unlabelled keypoints holding NaN, an output holding NaN: the kind's figures equal the reference's loops."""
    rng = np.random.default_rng(7)
    n, k = 60, 17
    y = np.concatenate([rng.uniform(0, 1, (n, k, 2)), np.where(rng.uniform(size=(n, k, 1)) < 0.3, 0.0, 2.0)], -1)
    y[0, :, 2], y[0, 3, 2] = 0.0, 2.0  # one labelled keypoint
    y[1, :, 0] = 0.4  # all on one line
    y[2, 5, :2] = np.nan  # an unlabelled keypoint without coordinates
    y[2, 5, 2] = 0.0
    out = np.concatenate([y[..., :2] + rng.normal(scale=0.06, size=(n, k, 2)), rng.uniform(size=(n, k, 1))], -1)
    out[3, 2, 0] = np.nan
    reading = _read(y.astype(np.float32), (1, k, 3))
    metrics = reading.task.metrics(reading.y, out.reshape(n, -1), None)
    mine = metrics.figures["keypoints"]
    expected = KF.figures(np.where(np.isfinite(out[..., :2]), out[..., :2], 9.0), y.astype(np.float32))
    assert mine.coco_sigmas and mine.sigmas == pytest.approx(KF.COCO_SIGMAS)
    assert mine.pck == pytest.approx(expected["pck"], abs=1e-12)
    assert mine.oks == pytest.approx(expected["oks"], rel=1e-9)
    assert mine.pck_per_keypoint == pytest.approx(expected["pck_per_keypoint"], abs=1e-12)
    score = reading.task.score(reading.y)
    assert score.measure(out.reshape(n, -1)).value == pytest.approx(expected["pck"], abs=1e-12)


def test_heatmaps_that_are_not_square_are_decoded_on_their_own_grid():
    """Heatmaps (4, 8, K): each keypoint at its top cell's centre, row / 4 and column / 8."""
    rng = np.random.default_rng(3)
    n, k = 30, 3
    y = rng.uniform(0.05, 0.95, (n, k, 2)).astype(np.float32)
    out = rng.uniform(0, 0.4, (n, 4, 8, k))
    out[np.arange(n)[:, None], np.floor(y[..., 0] * 4).astype(int), np.floor(y[..., 1] * 8).astype(int),
        np.arange(k)[None, :]] = 1.0
    reading = _read(y, (4, 8, k))
    mine = reading.task.metrics(reading.y, out.reshape(n, -1), None).figures["keypoints"]
    expected = KF.figures(KF.decoded(out), y)
    assert mine.pck == pytest.approx(expected["pck"], abs=1e-12) and mine.oks == pytest.approx(expected["oks"])
    # agreement with float's keypoints: the same peaks agree everywhere; keypoint 0 moved 3 columns (0.375, beyond 0.1
    # of any box in the unit image) disagrees
    moved = out.copy()
    moved[..., 0] = np.roll(out[..., 0], 3, axis=2)
    assert (reading.task.agreement(out.reshape(n, -1), out.reshape(n, -1)) == 1).all()
    assert reading.task.agreement(moved.reshape(n, -1), out.reshape(n, -1)) == pytest.approx(np.full(n, 2 / 3))
