"""A `package.module:function` data source for the tests (tests/ is on sys.path under pytest)."""

import os

import numpy as np


def load():
    d = np.load(os.environ["QR_TEST_DATA"])
    return {"x": d["x"], "y": np.eye(2, dtype=np.float32)[d["y"]]}  # one-hot labels
