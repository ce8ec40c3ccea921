"""Issue 67: the run keeps Python's collector off the libraries' objects (reporter.core.heap) and leaves a notebook's
collector as it found it. Checked against Python's own `gc` counters."""

import gc

import numpy as np

from reporter.core import heap


class _Node:
    def __init__(self):
        self.me = self  # a reference cycle: only the cyclic collector frees it


def test_imports_pause_collection_then_freeze_what_they_made():
    assert gc.get_freeze_count() == 0
    enabled = gc.isenabled()
    try:
        with heap.frozen_for_the_run():
            with heap.imports():
                assert not gc.isenabled()  # no collection while the library imports
                made = [_Node() for _ in range(1000)]
            assert gc.isenabled() == enabled
            assert gc.get_freeze_count() >= len(made)  # what exists after the import is skipped by collections
            del made
        assert gc.get_freeze_count() == 0  # the run's end: everything back to ordinary collection
    finally:
        gc.unfreeze()
        gc.enable() if enabled else gc.disable()


def test_the_runs_end_returns_only_what_it_froze_and_garbage_is_collected_again():
    assert gc.get_freeze_count() == 0
    with heap.frozen_for_the_run():
        heap.freeze()
        cycles = [_Node() for _ in range(100)]
        heap.freeze()
        del cycles  # cycles among frozen objects: not collected while frozen
        assert gc.collect() < 100
    assert gc.get_freeze_count() == 0
    assert gc.collect() >= 100  # unfrozen at the run's end: collected


def test_a_process_that_froze_objects_of_its_own_keeps_them_frozen():
    gc.freeze()
    try:
        before = gc.get_freeze_count()
        with heap.frozen_for_the_run():
            made = [_Node() for _ in range(100)]
            heap.freeze()  # someone else's freezing: not touched
            assert gc.get_freeze_count() == before
            del made
        assert gc.get_freeze_count() == before  # theirs, still frozen
    finally:
        gc.unfreeze()


def test_a_notebook_run_leaves_no_object_frozen(tmp_path):
    """reporter.run in a notebook's process: the run freezes TensorFlow's objects while it works and returns every
    one of them to ordinary collection when it ends, its figures unchanged by it."""
    import keras

    import reporter

    rng = np.random.default_rng(0)
    x = rng.normal(size=(64, 4)).astype(np.float32)
    y = (x[:, 0] > 0).astype(np.int64)
    model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(2, activation="softmax")])
    assert gc.get_freeze_count() == 0
    report = reporter.run(model, {"x": x, "y": y}, name="tiny", variants=["float"], latency_runs=0, quiet=True,
                          out=tmp_path, formats=["json"])
    assert gc.get_freeze_count() == 0
    expected = model.predict(x, verbose=0).argmax(1)  # Keras itself, against the run's float .tflite accuracy
    assert abs(report.variant("float").metrics.accuracy - float(np.mean(expected == y))) < 1e-6


def test_collection_is_paused_for_a_block_and_resumed_as_it_was():
    """The PDF's layout runs with the collector paused (its boxes are freed by the next collection): inside the
    block nothing is collected however much is allocated in cycles; after it, the collector is as it was (on, or
    off when the caller had turned it off)."""
    was = gc.isenabled()
    try:
        gc.enable()
        collections = sum(s["collections"] for s in gc.get_stats())
        with heap.paused():
            assert not gc.isenabled()
            for _ in range(50_000):  # many times generation 0's threshold of cyclic garbage
                cycle = []
                cycle.append(cycle)
            assert sum(s["collections"] for s in gc.get_stats()) == collections
        assert gc.isenabled()
        gc.disable()
        with heap.paused():
            pass
        assert not gc.isenabled()
    finally:
        (gc.enable if was else gc.disable)()
