"""Speed and scale without changing a number: data in a folder of memory-mapped .npy files, and conversions on a
second process, give the report the in-memory, one-process run gives."""

import json
from pathlib import Path

import numpy as np
import pytest

from conftest import run_cli

TIME_KEYS = {"generated_at", "tool_version", "tensorflow_version", "timings_s", "seconds", "seconds_per_candidate",
             "latency_ms", "source", "settings", "calibration_source_path"}


def _numbers(folder: Path) -> dict:
    """report.json without what may differ between two identical runs (times, paths, settings)."""
    def strip(value):
        if isinstance(value, dict):
            return {k: strip(v) for k, v in value.items() if k not in TIME_KEYS}
        if isinstance(value, list):
            return [strip(v) for v in value]
        return value
    return strip(json.loads((folder / "report.json").read_text(encoding="utf-8")))


def _npy_folder(npz: Path, folder: Path) -> Path:
    folder.mkdir()
    with np.load(npz) as d:
        for key in d.files:
            np.save(folder / f"{key}.npy", d[key])
    return folder


def test_an_npy_folder_is_read_memory_mapped_and_stays_mapped(mlp_files, tmp_path):
    from reporter.measure.signature import Port
    from reporter.inputs import binding, data_loading

    folder = _npy_folder(mlp_files[1], tmp_path / "data")
    np.save(folder / "x.npy", np.load(folder / "x.npy").astype(np.float32))
    data = data_loading.load_data(str(folder), 100)
    x = data.x.single()
    assert _mapped(x)  # on disk, read in batches
    port = Port(name="x", key="x", index=0, shape=(-1, *x.shape[1:]), dtype="float32")
    bound = binding._cast("data", "x", x, port, "m")
    assert _mapped(bound) and np.shares_memory(bound, x)  # bound to the model without a copy


def _mapped(a: np.ndarray) -> bool:
    """`a` is a view of a memory-mapped file (np.asarray of a memmap drops the subclass, not the mapping)."""
    import mmap

    while a is not None and not isinstance(a, mmap.mmap):
        if isinstance(a, np.memmap):
            return True
        a = getattr(a, "base", None)
    return isinstance(a, mmap.mmap)


@pytest.mark.slow
def test_an_npy_folder_gives_the_same_report_as_the_npz(mlp_files, tmp_path):
    model, npz = mlp_files
    folder = _npy_folder(npz, tmp_path / "data")
    flags = ("--formats", "json", "--latency-runs", "0")
    assert run_cli(model, npz, tmp_path / "a", *flags, name="m") == 0
    assert run_cli(model, folder, tmp_path / "b", *flags, name="m") == 0
    assert _numbers(tmp_path / "b" / "m") == _numbers(tmp_path / "a" / "m")


@pytest.mark.slow
def test_converting_on_a_second_process_changes_no_number(mlp_files, tmp_path, monkeypatch):
    """DRQ and float16 made by the side process (forced on for a small model), and LiteRT Quantizer's calibration
    collected in another process (the contained child, behind the search), give the bytes the run makes itself, and
    the same report."""
    from reporter.convert import litert, side

    model, data = mlp_files
    flags = ("--formats", "json", "--latency-runs", "0", "--variants", "float,drq,fiq,f16")
    monkeypatch.setattr(side, "MIN_MODEL_BYTES", 1 << 60)
    assert run_cli(model, data, tmp_path / "alone", *flags, name="m") == 0

    used = []
    original = side.SideConverter.result

    def recorded(self, variant):
        found = original(self, variant)
        used.append((variant, found is not None))
        return found

    from reporter.inputs import model_loading

    loaded_here = []  # the Keras model read in this process: the side process opened and described it instead
    read = model_loading.read_keras
    monkeypatch.setattr(model_loading, "read_keras", lambda *a, **k: loaded_here.append(a) or read(*a, **k))
    calibrated_here = []  # LiteRT Quantizer's statistics collected in this process
    calibrate = litert._calibrate  # noqa: SLF001
    monkeypatch.setattr(litert, "_calibrate", lambda *a: calibrated_here.append(1) or calibrate(*a))
    monkeypatch.setattr(side, "MIN_MODEL_BYTES", 0)
    monkeypatch.setattr(side.SideConverter, "result", recorded)
    assert run_cli(model, data, tmp_path / "side", *flags, name="m") == 0
    assert all(ok for _, ok in used) and {"drq", "f16"} <= {v for v, _ in used}
    assert loaded_here == [] and calibrated_here == []
    assert json.loads((tmp_path / "side" / "m" / "report.json").read_text())["recommendation"]["alternatives"]
    for variant in ("drq", "f16"):
        assert (tmp_path / "side" / "m" / f"{variant}.tflite").read_bytes() == \
            (tmp_path / "alone" / "m" / f"{variant}.tflite").read_bytes()
    assert _numbers(tmp_path / "side" / "m") == _numbers(tmp_path / "alone" / "m")


@pytest.mark.slow
@pytest.mark.parametrize("process", ["side", "contained"])
def test_search_candidates_built_on_the_side_process_are_the_ones_built_here(mlp_files, process):
    """The side process (a big model's; a small model's contained child) builds the search's next candidates from
    the last while the run builds from the first: each model it hands back is byte for byte the one the run's own
    quantizer builds, and the ones it had not started when the run reached them are built by the run instead."""
    from reporter.convert import contained, converter, side
    from reporter.convert.quantize import FiqQuantizer
    from reporter.inputs import model_loading
    from reporter.measure import structure
    from reporter.search import recommend

    model, data = mlp_files
    loaded = model_loading.load_model(model)
    x_calib = np.load(data)["x_calib"][:40].astype(np.float32)
    float_model = converter.convert(loaded.make_converter, "float", x_calib)
    quantizer = FiqQuantizer(loaded.make_converter, x_calib, float_model=float_model)
    fiq = quantizer.quantize([])
    layers = [name for name in structure.tensor_names(fiq) if name in quantizer.tensor_names][:6]
    sets = [frozenset(layers[:k]) for k in range(1, len(layers) + 1)]
    owner = side.SideConverter() if process == "side" else contained.Child()
    helper = owner if process == "side" else owner.helper()
    used = []
    original = helper.call

    def recorded(fn, *args):
        future = original(fn, *args)
        used.append(future)
        return future

    helper.call = recorded
    try:
        candidates = recommend.Candidates.__new__(recommend.Candidates)
        candidates.quantizer, candidates.ops, candidates._built, candidates._ahead = quantizer, [], {}, {}
        candidates._scored, candidates.helper = {}, helper
        candidates.ahead(sets)
        built = [candidates.build(s) for s in sets]
        candidates.settle()
    finally:
        owner.close()
    assert len(used) == len(sets) - 1  # every set but the first was offered to the side process
    assert any(f.done() and not f.cancelled() for f in used)  # and it built some of them
    assert built == [quantizer.quantize(sorted(s)) for s in sets]
