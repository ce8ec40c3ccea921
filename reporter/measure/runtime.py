"""The one door to LiteRT: every interpreter quant-report builds, the feeding of its inputs, the reading of its outputs.

`load` makes an interpreter (default, reference or builtin-only kernels, every tensor kept or not); `signature_names`
and `keyed` find the inputs by their signature names; `quantize`/`dequantize` move data across an integer input or
output by its scale and zero point; `run` feeds Inputs in large batches (or a fixed batch, padded) through tensor
indices, `chunks` runs a signature runner chunk by chunk or sample by sample (the tensors asked for kept).
"""

from __future__ import annotations

import os
import warnings
from pathlib import Path
from typing import Iterator, Optional, Union

import numpy as np

from reporter.model.data import Inputs

# Input bytes per invoke: one invoke for a typical evaluation set, bounded memory for a large one.
BATCH_BYTES = 32 * 1024 * 1024
CHUNK = 32  # samples per signature-runner invoke when the model takes a batch

Model = Union[bytes, bytearray, str, Path]


def load(model: Model, *, reference: bool = False, builtin: bool = False, preserve: bool = False,
         num_threads: Optional[int] = None, separate_ops: bool = False):
    """A LiteRT interpreter on `model` (its bytes, or a path to a .tflite file).

    `reference`: LiteRT's reference kernels (BUILTIN_REF, what TFLite Micro and many NPUs implement), single-threaded;
    `builtin`: its own optimized kernels without the default delegate (XNNPACK); `preserve`: every intermediate
    tensor kept after an invoke; `separate_ops`: a delegate takes each op as its own partition (every op output is
    then a kernel output, so `preserve` keeps it)."""
    from ai_edge_litert.interpreter import Interpreter, OpResolverType

    content = model if isinstance(model, (bytes, bytearray)) else Path(model).read_bytes()
    options: dict = {"model_content": content}
    if preserve:
        options["experimental_preserve_all_tensors"] = True
    if reference:
        options.update(num_threads=1, experimental_op_resolver_type=OpResolverType.BUILTIN_REF)
    else:
        if builtin:
            options["experimental_op_resolver_type"] = OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES
        if num_threads is not None:
            options["num_threads"] = num_threads
    with warnings.catch_warnings():
        # Keeping every tensor is what `preserve` asks for: LiteRT's "debugging purposes only" warning says nothing.
        warnings.filterwarnings("ignore", message=".*experimental_preserve_all_tensors.*")
        if separate_ops:
            try:
                return Interpreter(experimental_disable_delegate_node_fusion=True, **options)
            except TypeError:  # pragma: no cover - an interpreter without that option
                pass
        return Interpreter(**options)


def allocated(model: Model, preserve: bool = False):
    """An allocated interpreter with the default kernels, or without the default delegate where XNNPACK refuses the
    model (it does refuse some int8 graphs that LiteRT's own kernels run)."""
    it = load(model, preserve=preserve)
    try:
        it.allocate_tensors()
    except RuntimeError:
        it = load(model, preserve=preserve, builtin=True)
        it.allocate_tensors()
    return it


def loads_on_reference(model: Model) -> str:
    """"" when LiteRT's reference kernels (what integer-only hardware implements) load the model, else why not."""
    try:
        load(model, reference=True).allocate_tensors()
    except (RuntimeError, ValueError) as exc:
        return f"LiteRT cannot load it: {str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__}"
    return ""


# --- signature and inputs -----------------------------------------------------------------------------------------
def signature_names(model: Model) -> tuple[str, list[str], list[str]]:
    """(signature key, its input names, its output names): serving_default, else the first by name. Raises ValueError
    when the model has no signature."""
    signatures = load(model).get_signature_list()
    if not signatures:
        raise ValueError("the model has no signature (LiteRT Quantizer calibrates through one)")
    key = "serving_default" if "serving_default" in signatures else sorted(signatures)[0]
    return key, list(signatures[key]["inputs"]), list(signatures[key]["outputs"])


def port_details(model: Model) -> tuple[dict, dict]:
    """(input details, output details) of the model's signature runner, by signature name."""
    runner = load(model).get_signature_runner(signature_names(model)[0])
    return runner.get_input_details(), runner.get_output_details()


def takes_batches(model: Model) -> bool:
    """Every input's first dimension is dynamic: any number of samples per invoke."""
    details = load(model).get_input_details()
    return all(len(d["shape_signature"]) and d["shape_signature"][0] == -1 for d in details)


def as_inputs(x) -> Inputs:
    """`x` as Inputs: a single array is the one input of a one-input model."""
    if isinstance(x, Inputs):
        return x
    if isinstance(x, dict):
        return Inputs(x)
    return Inputs({"": np.asarray(x)})


def keyed(x, names: list[str]) -> dict[str, np.ndarray]:
    """`x` by the signature's input names (the one array of a one-input model whatever it is called), float arrays
    as float32 and integer ones (ids) as they are."""
    x = as_inputs(x)
    arrays = {names[0]: x.single()} if len(x.arrays) == 1 and len(names) == 1 else {n: x[n] for n in names}
    return {k: a if np.issubdtype(a.dtype, np.integer) else a.astype(np.float32) for k, a in arrays.items()}


# --- quantized inputs and outputs ---------------------------------------------------------------------------------
def quantize(x: np.ndarray, dtype, scale: float = 0.0, zero_point: int = 0) -> np.ndarray:
    """Data as an input of type `dtype` takes it: quantized with its scale and zero point for an integer input with a
    scale, cast otherwise (an integer input without a scale takes ids as they are)."""
    dtype = np.dtype(dtype)
    if scale and np.issubdtype(dtype, np.integer):
        info = np.iinfo(dtype)
        return np.clip(np.round(x / scale + zero_point), info.min, info.max).astype(dtype)
    return x.astype(dtype)


def dequantize(y: np.ndarray, scale: float = 0.0, zero_point: int = 0) -> np.ndarray:
    """An output's real values as float32: (y - zero point) * scale when it has a scale."""
    if not scale:
        return y.astype(np.float32)
    return ((y.astype(np.float32) - zero_point) * scale).astype(np.float32)


def to_port(x: np.ndarray, port) -> np.ndarray:
    """`quantize` for a reporter.measure.signature.Port (ids go in as they are)."""
    return quantize(x, port.dtype, port.scale if port.quantized else 0.0, port.zero_point)


def from_port(y: np.ndarray, port) -> np.ndarray:
    """`dequantize` for a reporter.measure.signature.Port."""
    return dequantize(y, port.scale if port.quantized else 0.0, port.zero_point)


def feed(x: Inputs, ports) -> dict:
    """Which array goes into which input port (by tensor index): by name, or the one array into the one input."""
    if len(ports) == 1 and len(x.arrays) == 1:
        return {ports[0].index: x.single()}
    missing = [p.key for p in ports if p.key not in x.arrays]
    if missing:
        raise ValueError(f"no data for input(s) {', '.join(missing)} (data for: {', '.join(x.names)})")
    return {p.index: x[p.key] for p in ports}


# --- runs ---------------------------------------------------------------------------------------------------------
REFERENCE_SPLIT_SAMPLES = 64  # LiteRT's reference kernels run on one thread: more samples than this are shared out


def run(model: bytes, x, in_ports, out_ports, reference: bool = False) -> dict[int, np.ndarray]:
    """Every sample of `x` (Inputs) through `model`, one dequantized row per sample for each of `out_ports` (by tensor
    index): in batches of about BATCH_BYTES of input, resized to each batch.

    A model with a fixed batch dimension (like a tf_keras LSTM built with batch_size=1) cannot be resized: it runs
    that many samples per invoke, the last batch padded with copies of its last sample. LiteRT's reference kernels are
    single-threaded: their samples are shared among one interpreter per core, each in a thread of its own (an invoke
    releases the GIL; every sample's outputs are its own, whatever the batch it ran in)."""
    parts = min(os.cpu_count() or 1, len(x) // REFERENCE_SPLIT_SAMPLES) if reference else 1
    if parts > 1:
        from concurrent.futures import ThreadPoolExecutor

        x = as_inputs(x)
        cuts = np.linspace(0, len(x), parts + 1).astype(int)
        with ThreadPoolExecutor(parts) as pool:
            done = list(pool.map(lambda k: _run(model, x[cuts[k]:cuts[k + 1]], in_ports, out_ports, True),
                                 range(parts)))
        return {p.index: np.concatenate([d[p.index] for d in done]) for p in out_ports}
    return _run(model, x, in_ports, out_ports, reference)


def _run(model: bytes, x, in_ports, out_ports, reference: bool) -> dict[int, np.ndarray]:
    it = load(model, num_threads=os.cpu_count(), reference=reference)
    ports = list(in_ports)
    arrays = feed(x, ports)
    fixed_batch = any(len(p.shape) > 0 and p.shape[0] != -1 for p in ports)
    sample_bytes = max(1, sum(int(np.prod(a.shape[1:])) for a in arrays.values()) * 4)
    batch = int(ports[0].shape[0]) if fixed_batch else max(1, BATCH_BYTES // sample_bytes)
    n_all = len(x)
    current = min(batch, n_all) if not fixed_batch else batch
    if not fixed_batch:
        for p in ports:
            it.resize_tensor_input(p.index, [current, *arrays[p.index].shape[1:]])
    it.allocate_tensors()
    results: dict[int, list] = {p.index: [] for p in out_ports}
    for start in range(0, n_all, batch):
        n = min(batch, n_all - start)
        if not fixed_batch and n != current:
            for p in ports:
                it.resize_tensor_input(p.index, [n, *arrays[p.index].shape[1:]])
            it.allocate_tensors()
            current = n
        # Recurrent ops keep their state in variable tensors that outlive an invoke: without a
        # reset, each sample would start from the previous sample's state.
        it.reset_all_variables()
        for p in ports:
            chunk = arrays[p.index][start : start + batch]
            if fixed_batch and n < batch:
                chunk = np.concatenate([chunk, np.repeat(chunk[-1:], batch - n, axis=0)])
            it.set_tensor(p.index, to_port(chunk, p))
        it.invoke()
        for p in out_ports:
            results[p.index].append(from_port(it.get_tensor(p.index), p)[:n])
    return {p.index: np.concatenate(results[p.index]).reshape(n_all, -1) for p in out_ports}


def chunks(model: bytes, x: dict[str, np.ndarray], batched: Optional[bool] = None, keep: tuple = ()
           ) -> Iterator[tuple[dict[str, np.ndarray], dict[int, np.ndarray], int]]:
    """Yields (outputs by signature name, dequantized; {tensor index: value} for `keep`; samples) per invoke of the
    model's signature runner over `x` (signature name -> array, quantized on the way in where the input is): CHUNK
    samples per invoke, or one when the model takes a batch of 1 only (`batched` None: read from the model)."""
    it = allocated(model, preserve=bool(keep))
    runner = it.get_signature_runner(signature_names(model)[0])
    ins, outs = runner.get_input_details(), runner.get_output_details()
    step = CHUNK if (takes_batches(model) if batched is None else batched) else 1
    n = len(next(iter(x.values())))
    for start in range(0, n, step):
        got = runner(**{name: quantize(x[name][start:start + step], d["dtype"], *d["quantization"])
                        for name, d in ins.items()})
        yield ({name: dequantize(got[name], *d["quantization"]) for name, d in outs.items()},
               {t: np.array(it.get_tensor(t)) for t in keep}, min(step, n - start))


def outputs(model: bytes, x: dict[str, np.ndarray], batched: Optional[bool] = None) -> dict[str, np.ndarray]:
    """The model's outputs (dequantized) over `x` by signature name: `chunks` put together."""
    parts: dict[str, list] = {}
    for got, _, _ in chunks(model, x, batched):
        for name, value in got.items():
            parts.setdefault(name, []).append(value)
    return {name: np.concatenate(p) for name, p in parts.items()}
