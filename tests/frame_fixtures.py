"""A per-frame sigmoid model for tests/test_output_reading.py: three outputs, each a sigmoid per frame and pitch
reshaped flat (what a music transcription model's note, onset and offset heads look like), so that the op making
each output is a RESHAPE and the sigmoid is found behind it.

Seeded, trained in seconds, cached on disk like the other fixtures (`ensure`, model_fixtures.ensure, a VERSION key)
as model.keras + data.npz.

* frames: a synthetic piano roll (FRAMES x PITCHES: notes of 2-6 frames at random pitches) mixed into FEATURES
  audio-like features per frame (a fixed seeded mixing matrix, a decay of the previous frame, Gaussian noise): input
  `x` (32, 16) float32 -> Conv1D(32, 3, same, relu) -> Conv1D(32, 3, same, relu) -> three heads, each
  Dense(PITCHES, sigmoid) per frame (`<name>_p`) then Reshape((FRAMES * PITCHES,)) named `onsets`, `frames`,
  `offsets` (outputs in that order). Labels per output, 0/1 float32 of its flat shape: `y_onsets` (a note's first
  frame), `y_frames` (every frame it sounds), `y_offsets` (its last frame).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

import model_fixtures as M

VERSION = 1
FRAMES, FEATURES, PITCHES = 32, 16, 8
OUTPUTS = ("onsets", "frames", "offsets")
N_TRAIN, N_EVAL = 600, 200
EPOCHS = 15
NOISE = 0.3


def piano_rolls(n: int, rng) -> dict[str, np.ndarray]:
    """{output name: (n, FRAMES, PITCHES) 0/1 float32}: onsets, frames (sounding) and offsets of random notes."""
    rolls = {name: np.zeros((n, FRAMES, PITCHES), np.float32) for name in OUTPUTS}
    for i in range(n):
        for _ in range(int(rng.integers(3, 9))):
            pitch, start = int(rng.integers(PITCHES)), int(rng.integers(FRAMES - 2))
            end = min(FRAMES, start + int(rng.integers(2, 7)))
            rolls["frames"][i, start:end, pitch] = 1
            rolls["onsets"][i, start, pitch] = 1
            rolls["offsets"][i, end - 1, pitch] = 1
    return rolls


def features(rolls: dict, rng) -> np.ndarray:
    """(n, FRAMES, FEATURES) float32: each frame's sounding pitches mixed into the features, onsets louder, the
    previous frame decaying into the next, plus noise."""
    mixing = np.random.default_rng(M.SEED + 1).normal(size=(PITCHES, FEATURES)).astype(np.float32)
    energy = rolls["frames"] + rolls["onsets"]
    x = energy @ mixing
    x[:, 1:] += 0.5 * x[:, :-1]
    return (x + rng.normal(0.0, NOISE, size=x.shape)).astype(np.float32)


def build_frames(folder: Path):
    import keras

    rng = np.random.default_rng(M.SEED)
    rolls = piano_rolls(N_TRAIN + N_EVAL, rng)
    x = features(rolls, rng)
    flat = {name: roll.reshape(len(roll), -1) for name, roll in rolls.items()}
    M.seed()
    inp = keras.Input((FRAMES, FEATURES), name="x")
    h = keras.layers.Conv1D(32, 3, padding="same", activation="relu", name="conv_1")(inp)
    h = keras.layers.Conv1D(32, 3, padding="same", activation="relu", name="conv_2")(h)
    heads = [keras.layers.Reshape((FRAMES * PITCHES,), name=name)(
        keras.layers.Dense(PITCHES, activation="sigmoid", name=f"{name}_p")(h)) for name in OUTPUTS]
    model = keras.Model(inp, heads, name="frames")
    model.compile(keras.optimizers.Adam(1e-2), ["binary_crossentropy"] * len(OUTPUTS))
    model.fit(x[N_EVAL:], [flat[name][N_EVAL:] for name in OUTPUTS], epochs=EPOCHS, batch_size=M.BATCH_SIZE,
              verbose=0)
    model.save(folder / "model.keras")
    labels = {f"y_{name}": flat[name][:N_EVAL] for name in OUTPUTS}
    np.savez(folder / "data.npz", x=x[:N_EVAL], x_calib=x[N_EVAL:], **labels)


def ensure(cache_root) -> tuple[Path, Path]:
    """The cached model.keras and data.npz of the per-frame sigmoid model, built first if needed."""
    return M.ensure(cache_root, f"frames-v{VERSION}", "frames", build_frames)

