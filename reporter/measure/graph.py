"""The one flatbuffer graph editor: a .tflite read into objects, its ops, tensors and buffers found, constants
replaced, tensors no op uses dropped, and the model written back (LiteRT's flatbuffer_utils, TensorFlow's where the
LiteRT wheel lacks it: reading and writing a model imports no TensorFlow)."""

from __future__ import annotations

from typing import Optional

import numpy as np


def schema():
    """The generated TFLite flatbuffer schema: its enums (TensorType, BuiltinOperator, BuiltinOptions) and its read
    API (`Model.GetRootAs`). LiteRT's copy, TensorFlow's where the LiteRT wheel lacks it."""
    try:
        from ai_edge_litert import schema_py_generated as found
    except ImportError:  # pragma: no cover - an ai-edge-litert without the schema module
        from tensorflow.lite.python import schema_py_generated as found
    return found


def _flatbuffer_utils():
    """LiteRT's flatbuffer_utils (the same reader and writer as TensorFlow's, on LiteRT's schema), else
    TensorFlow's."""
    try:
        from ai_edge_litert.tools import flatbuffer_utils
    except ImportError:  # pragma: no cover - an ai-edge-litert without its tools
        from tensorflow.lite.tools import flatbuffer_utils
    return flatbuffer_utils


def objects():
    """The object-API classes (ModelT, BufferT, TensorT ...) of the schema flatbuffer_utils reads and writes with: new
    objects must be of the classes it packs."""
    return _flatbuffer_utils().schema_fb


def read_model(model: bytes):
    """The model as a mutable object tree (ModelT)."""
    return _flatbuffer_utils().convert_bytearray_to_object(bytearray(model))


def write_model(obj, drop_orphans: bool = True) -> bytes:
    """The model object as .tflite bytes; with `drop_orphans`, the buffers of constants an edit replaced emptied
    first."""
    if drop_orphans:
        drop_orphan_buffers(obj)
    return bytes(_flatbuffer_utils().convert_object_to_bytearray(obj))


def tensor_name(t) -> str:
    return t.name.decode() if isinstance(t.name, bytes) else str(t.name)


def op_names(obj) -> list[str]:
    """Each operator code's builtin name ("" for a custom op), by opcode index."""
    names = {v: k for k, v in vars(schema().BuiltinOperator).items() if not k.startswith("_")}
    return [names.get(max(c.builtinCode, c.deprecatedBuiltinCode), "") for c in obj.operatorCodes]


def main_ops(obj) -> list[tuple[str, list[int], list[int]]]:
    """The main subgraph's ops as (name: builtin, or a custom op's code; input tensors; output tensors), in execution
    order."""
    if not obj.subgraphs:
        return []
    names = [(c.customCode.decode() if isinstance(c.customCode, bytes) else str(c.customCode)) if c.customCode
             else name for c, name in zip(obj.operatorCodes, op_names(obj))]
    return [(names[op.opcodeIndex], [int(i) for i in (op.inputs if op.inputs is not None else [])],
             [int(i) for i in (op.outputs if op.outputs is not None else [])])
            for op in obj.subgraphs[0].operators or []]


def op_details(model: bytes) -> list[dict]:
    """The main subgraph's ops as LiteRT's interpreter lists them (index, op_name, inputs, outputs), read from the
    flatbuffer: the interpreter's op list is private API (`_get_ops_details`), its ops are the file's, in order.
    Read in place (only the op codes and the ops, not every tensor and buffer unpacked into objects: 30 ms for
    EfficientNet-B0, called for every model the search measures): the same list as `main_ops(read_model(model))`."""
    root = schema().Model.GetRootAs(bytearray(model) if not isinstance(model, (bytes, bytearray)) else model, 0)
    if not root.SubgraphsLength():
        return []
    builtin = {v: k for k, v in vars(schema().BuiltinOperator).items() if not k.startswith("_")}
    names = []
    for k in range(root.OperatorCodesLength()):
        code = root.OperatorCodes(k)
        custom = code.CustomCode()
        names.append((custom.decode() if isinstance(custom, bytes) else str(custom)) if custom
                     else builtin.get(max(code.BuiltinCode(), code.DeprecatedBuiltinCode()), ""))
    main = root.Subgraphs(0)
    found = []
    for k in range(main.OperatorsLength()):
        op = main.Operators(k)
        inputs, outputs = op.InputsAsNumpy(), op.OutputsAsNumpy()
        found.append({"index": k, "op_name": names[op.OpcodeIndex()],
                      "inputs": [int(i) for i in inputs] if not isinstance(inputs, int) else [],
                      "outputs": [int(i) for i in outputs] if not isinstance(outputs, int) else []})
    return found


# Ops that only move values (reshape, reorder, select, join, re-encode them) and the position of each one's data
# input (None: every input is data, e.g. CONCATENATION): an output they make holds the values of the op before them,
# so a sigmoid's probabilities reshaped flat are still probabilities. Nothing here computes a new value.
DATA_MOVEMENT = {"RESHAPE": 0, "SQUEEZE": 0, "EXPAND_DIMS": 0, "TRANSPOSE": 0, "QUANTIZE": 0, "DEQUANTIZE": 0,
                 "STRIDED_SLICE": 0, "SLICE": 0, "GATHER": 0, "UNPACK": 0, "SPLIT": 1, "SPLIT_V": 0,
                 "CONCATENATION": None, "PACK": None}


class MadeBy(str):
    """The op an output's values come from, as its builtin name (what the task kinds compare: "LOGISTIC"), found back
    through ops that only move data (DATA_MOVEMENT); `shape` is that op's output shape (the batch first, -1 where
    dynamic), before any reshape: a sigmoid at every frame and pitch, (1, 32, 8), reshaped flat to (1, 256)."""

    shape: tuple = ()

    def __new__(cls, name: str, shape=()) -> "MadeBy":
        made = super().__new__(cls, name)
        made.shape = tuple(int(d) for d in shape)
        return made


def made_by(model: bytes) -> dict[int, MadeBy]:
    """Tensor index (main subgraph) -> the op its values come from (`MadeBy`): its producer, or, when that only moves
    data, the op behind it, followed back until an op computes (LOGISTIC, SOFTMAX, FULLY_CONNECTED ...). A join
    (CONCATENATION, PACK) is made by its parts' op when every part is made by the same op and none is a constant;
    otherwise, like a data-movement op reading a constant, by itself. A tensor no op makes is absent."""
    obj = read_model(model)
    if not obj.subgraphs:
        return {}
    sg = obj.subgraphs[0]
    ops = main_ops(obj)
    producer = {t: n for n, (_, _, outs) in enumerate(ops) for t in outs if t >= 0}
    found: dict[int, MadeBy] = {}

    def shape(t: int) -> tuple:
        tensor = sg.tensors[t]
        dims = tensor.shapeSignature if tensor.shapeSignature is not None and len(tensor.shapeSignature) else \
            tensor.shape
        return tuple(int(d) for d in dims) if dims is not None else ()

    def origin(t: int) -> MadeBy:
        # Iterative over the chain, so that a long run of reshapes never recurses deep; joins recurse on their parts.
        chain, made = [], None
        while made is None:
            if t in found:
                made = found[t]
                break
            chain.append(t)
            name, ins, _ = ops[producer[t]]
            position = DATA_MOVEMENT.get(name, -1)
            data = [i for i in ins if i >= 0] if position is None else ins[position:position + 1]
            data = [i for i in data if i >= 0]
            if position == -1 or not data or any(i not in producer for i in data):
                made = MadeBy(name, shape(t))  # it computes, or moves a constant or an input: its own op
            elif len(data) == 1:
                t = data[0]
            else:
                parts = {origin(i) for i in data}
                made = next(iter(parts)) if len(parts) == 1 else MadeBy(name, shape(t))
        for t in chain:
            found[t] = made
        return made

    for t in producer:
        origin(t)
    return found


def host_outputs(obj) -> list[int]:
    """The main subgraph's tensors the host ops (reporter.core.targets.rules.host_group: a detector's postprocess)
    write, in op order: the postprocess outputs and those of the QUANTIZE/DEQUANTIZE ops carrying them on (not the
    DEQUANTIZE outputs feeding it)."""
    from reporter.core.targets.rules import HOST_OPS, host_group

    main = main_ops(obj)
    made: list[int] = []
    for n in host_group(main):
        name, ins, outs = main[n]
        if name in HOST_OPS or (ins and ins[0] in made):
            made += outs
    return made


def with_static_shapes(model: bytes) -> bytes:
    """`model` with each host output's (a detector's postprocess outputs: `host_outputs`) shape and shape_signature
    set to the shape LiteRT allocates. The converter writes them [] (LiteRT sizes them only when it prepares the
    op); TFLite Micro and other runtimes read the file's. A model without such outputs, or whose file already says
    them, is returned as it is, byte for byte."""
    if not _has_host_op(model):  # the common case, read without unpacking the whole model
        return model
    obj = read_model(with_buffers_inline(model))  # rewritten, an offset would point past the new file's end
    outputs = host_outputs(obj)
    if not outputs:
        return model
    from reporter.measure import runtime

    it = runtime.load(model, builtin=True)
    it.allocate_tensors()
    sizes = {d["index"]: [int(v) for v in d["shape"]] for d in it.get_tensor_details()}
    tensors = obj.subgraphs[0].tensors
    if all(_dims(tensors[i].shape) == _dims(tensors[i].shapeSignature) == sizes[i] for i in outputs):
        return model
    for i in outputs:
        tensors[i].shape = np.array(sizes[i], np.int32)
        tensors[i].shapeSignature = np.array(sizes[i], np.int32)
    return write_model(obj, drop_orphans=False)


def offset_buffers(model: bytes) -> int:
    """How many of the model's buffers are stored after the flatbuffer (`Buffer.offset`/`size`, as LiteRT Quantizer
    writes weights once they pass 256 KiB) rather than inline (`Buffer.data`)."""
    read = schema().Model.GetRootAs(bytearray(model), 0)
    return sum(1 for i in range(read.BuffersLength()) if read.Buffers(i).Offset() > 1)


def with_buffers_inline(model: bytes) -> bytes:
    """`model` with every buffer stored after the flatbuffer (`offset_buffers`) moved inline, as TF's converter
    writes them (flatbuffer_utils' reader moves them): TFLite Micro reads `Buffer.data` only and ignores the offsets
    (it then computes on uninitialized arena memory). The same tensors and values; a model with no such buffer is
    returned as it is, byte for byte."""
    if not offset_buffers(model):
        return model
    from tensorflow.lite.tools import flatbuffer_utils

    return bytes(flatbuffer_utils.convert_object_to_bytearray(flatbuffer_utils.read_model_from_bytearray(
        bytearray(model))))


def with_op_outputs(model: bytes) -> tuple[bytes, list[tuple[str, int]]]:
    """`model` (its buffers inline) with the main subgraph's outputs replaced by every op's output tensor in
    execution order, so that a runtime that hands back graph outputs only (TFLite Micro) returns each op's result;
    and each op's (name, output tensor), output by output. The ops and their values are unchanged."""
    obj = read_model(with_buffers_inline(model))
    ops: list[tuple[str, int]] = []
    for name, _, outs in main_ops(obj):
        if outs and outs[0] >= 0 and all(outs[0] != t for _, t in ops):
            ops.append((name, outs[0]))
    obj.subgraphs[0].outputs = np.array([t for _, t in ops], np.int32)
    return write_model(obj, drop_orphans=False), ops


def quantized_host_outputs(obj) -> list[int]:
    """Positions of the QUANTIZE ops that read a host op's float output (a detector's postprocess) and write a graph
    output: what makes a detector's outputs int8 (and clip to their calibration ranges)."""
    from reporter.core.targets.rules import HOST_OPS

    main = main_ops(obj)
    made = {t for name, _, outs in main if name in HOST_OPS for t in outs}
    outputs = {int(i) for i in obj.subgraphs[0].outputs} if obj.subgraphs else set()
    return [n for n, (name, ins, outs) in enumerate(main)
            if name == "QUANTIZE" and ins and ins[0] in made and set(outs) <= outputs]


def without_output_quantize(model: bytes) -> bytes:
    """`model` with the QUANTIZE ops after its host postprocess removed (`quantized_host_outputs`): each graph and
    signature output becomes the postprocess's own float output. Exact for the network: only the outputs' int8
    rounding and clipping go."""
    obj = read_model(with_buffers_inline(model))  # rewritten, an offset would point past the new file's end
    drop = quantized_host_outputs(obj)
    if not drop:
        return model
    sg = obj.subgraphs[0]
    carried = {int(sg.operators[n].outputs[0]): int(sg.operators[n].inputs[0]) for n in drop}
    sg.outputs = np.array([carried.get(int(i), int(i)) for i in sg.outputs], np.int32)
    for sig in obj.signatureDefs or []:
        if sig.subgraphIndex == 0:
            for port in sig.outputs or []:
                port.tensorIndex = carried.get(int(port.tensorIndex), int(port.tensorIndex))
    gone = set(drop)
    sg.operators = [op for n, op in enumerate(sg.operators) if n not in gone]
    compact(obj)
    return write_model(obj)


def _has_host_op(model: bytes) -> bool:
    """The model has an op of reporter.core.targets.rules.HOST_OPS (each a custom op: named by its custom code)."""
    from reporter.core.targets.rules import HOST_OPS

    read = schema().Model.GetRootAs(bytearray(model), 0)
    codes = (read.OperatorCodes(i).CustomCode() for i in range(read.OperatorCodesLength()))
    return any(code is not None and code.decode("utf-8", "replace") in HOST_OPS for code in codes)


def _dims(shape) -> Optional[list[int]]:
    return [int(d) for d in shape] if shape is not None else None


def op_name(obj, op) -> str:
    """The builtin name of `op` ("FULLY_CONNECTED", ...)."""
    return op_names(obj)[op.opcodeIndex]


def has_data(obj, t) -> bool:
    """Tensor `t` holds constant data in a buffer of its own."""
    data = obj.buffers[t.buffer].data if 0 < t.buffer < len(obj.buffers) else None
    return data is not None and len(data) > 0


def constant(obj, index: int) -> Optional[np.ndarray]:
    """The float32 constant at tensor `index` of the main subgraph (a copy), or None when it is not one."""
    t = obj.subgraphs[0].tensors[index]
    if not has_data(obj, t) or t.type != schema().TensorType.FLOAT32:
        return None
    data = obj.buffers[t.buffer].data
    return np.frombuffer(bytes(np.asarray(data, np.uint8)), np.float32).reshape([int(d) for d in t.shape]).copy()


def integers(obj, index: int) -> Optional[np.ndarray]:
    """The int32 constant at tensor `index` of the main subgraph (flat), or None when it is not one."""
    t = obj.subgraphs[0].tensors[index]
    if not has_data(obj, t) or t.type != schema().TensorType.INT32:
        return None
    return np.frombuffer(bytes(np.asarray(obj.buffers[t.buffer].data, np.uint8)), np.int32)


def add_buffer(obj, array: np.ndarray) -> int:
    """A new buffer holding `array`'s bytes; its number."""
    buffer = objects().BufferT()
    buffer.data = np.frombuffer(np.ascontiguousarray(array).tobytes(), np.uint8)
    obj.buffers.append(buffer)
    return len(obj.buffers) - 1


def buffer_view(raw: bytearray, obj, index: int) -> Optional[np.ndarray]:
    """A writable uint8 view of buffer `index`'s bytes inside `raw` (the model file `obj` was read from): inline, or
    appended after the flatbuffer at an offset (as LiteRT Quantizer writes them); None when the buffer holds nothing.
    Writing into the view patches the file in place, its layout kept."""
    buffer = obj.buffers[index]
    if (getattr(buffer, "offset", 0) or 0) > 1:
        return np.frombuffer(raw, np.uint8, count=int(buffer.size), offset=int(buffer.offset))
    view = objects().Model.GetRootAs(raw, 0).Buffers(index).DataAsNumpy()
    return view if isinstance(view, np.ndarray) and view.size else None


def consumers(sg, index: int) -> list:
    """The ops of subgraph `sg` that read tensor `index`."""
    return [op for op in sg.operators if index in [int(i) for i in op.inputs]]


def compact(obj) -> None:
    """Drops the main subgraph's tensors no op, input or output uses, renumbering every reference."""
    sg = obj.subgraphs[0]
    used = set(sg.inputs) | set(sg.outputs)
    for op in sg.operators:
        used |= {int(i) for i in list(op.inputs) + list(op.outputs) if i >= 0}
    keep = sorted(used)
    new = {old: n for n, old in enumerate(keep)}
    sg.tensors = [sg.tensors[i] for i in keep]
    for op in sg.operators:
        op.inputs = np.array([new[int(i)] if i >= 0 else -1 for i in op.inputs], np.int32)
        op.outputs = np.array([new[int(i)] for i in op.outputs], np.int32)
    sg.inputs = np.array([new[int(i)] for i in sg.inputs], np.int32)
    sg.outputs = np.array([new[int(i)] for i in sg.outputs], np.int32)
    for sig in obj.signatureDefs or []:
        if sig.subgraphIndex == 0:
            for port in list(sig.inputs or []) + list(sig.outputs or []):
                port.tensorIndex = new[int(port.tensorIndex)]


def drop_orphan_buffers(obj) -> int:
    """Empties every buffer no tensor of any subgraph refers to (a constant an edit replaced: the file would carry
    the old weights as dead bytes, and the quantizers keep them); returns how many. Buffer numbers stay as they are."""
    used = {int(t.buffer) for sg in obj.subgraphs for t in sg.tensors or []}
    dropped = 0
    for n, buffer in enumerate(obj.buffers):
        if n and n not in used and buffer.data is not None and len(buffer.data):
            buffer.data, dropped = None, dropped + 1
    return dropped


class Graph:
    """The main subgraph of a model object with its producers and consumers, and edits on it."""

    def __init__(self, model: bytes):
        self.obj = read_model(model)
        self.sg = self.obj.subgraphs[0]
        self.kinds = op_names(self.obj)
        self.index()

    def index(self):
        """Finds each tensor's producer and consumers again (after an edit)."""
        self.producer, self.consumers = {}, {}
        for n, op in enumerate(self.sg.operators):
            for i in op.outputs:
                self.producer[int(i)] = n
            for pos, i in enumerate(op.inputs):
                if i >= 0:
                    self.consumers.setdefault(int(i), []).append((n, pos))

    def kind(self, n: int) -> str:
        return self.kinds[self.sg.operators[n].opcodeIndex]

    def ins(self, n: int) -> list[int]:
        return [int(i) for i in self.sg.operators[n].inputs]

    def out(self, n: int) -> int:
        return int(self.sg.operators[n].outputs[0])

    def shape(self, t: int) -> list[int]:
        return [int(d) for d in self.sg.tensors[t].shape] if self.sg.tensors[t].shape is not None else []

    def last(self, t: int) -> int:
        shape = self.shape(t)
        return shape[-1] if shape else 1

    def constant(self, t: int) -> Optional[np.ndarray]:
        return constant(self.obj, t)

    def integers(self, t: int) -> Optional[np.ndarray]:
        return integers(self.obj, t)

    def is_constant(self, t: int) -> bool:
        return has_data(self.obj, self.sg.tensors[t])

    def activation(self, n: int) -> int:
        return int(getattr(self.sg.operators[n].builtinOptions, "fusedActivationFunction", 0) or 0)

    def __len__(self) -> int:
        """How many ops the main subgraph has."""
        return len(self.sg.operators)

    def outputs(self) -> set[int]:
        """The main subgraph's output tensors."""
        return {int(i) for i in self.sg.outputs}

    def option(self, n: int, name: str, default=False):
        """Op `n`'s builtin option `name` ("adjY", ...), or `default` when it has none."""
        return getattr(self.sg.operators[n].builtinOptions, name, default)

    def name(self, t: int) -> str:
        return tensor_name(self.sg.tensors[t])

    def is_float(self, t: int) -> bool:
        """Tensor `t` is float32."""
        return self.sg.tensors[t].type == schema().TensorType.FLOAT32

    def set_input(self, n: int, pos: int, t: int) -> None:
        """Op `n` reads tensor `t` at input `pos`."""
        self.sg.operators[n].inputs[pos] = t

    def set_option(self, n: int, name: str, value) -> None:
        """Op `n`'s builtin option `name` set to `value`."""
        setattr(self.sg.operators[n].builtinOptions, name, value)

    def remove_op(self, n: int) -> None:
        """Op `n` removed (call `index` after)."""
        self.sg.operators.pop(n)

    def replace_input(self, n: int, pos: int, array: np.ndarray, suffix: str) -> None:
        """Op `n` reads a new float32 constant tensor `array` at input `pos` (the old tensor stays for other ops)."""
        old = self.sg.tensors[self.ins(n)[pos]]
        tensor = objects().TensorT()
        tensor.shape = np.array(array.shape, np.int32)
        tensor.type = schema().TensorType.FLOAT32
        tensor.buffer = add_buffer(self.obj, np.ascontiguousarray(array, np.float32))
        tensor.name = (tensor_name(old) + suffix).encode()
        self.sg.tensors.append(tensor)
        self.sg.operators[n].inputs[pos] = len(self.sg.tensors) - 1

    def opcode(self, kind: str) -> int:
        """The operator code index of builtin `kind`, added when the model has none."""
        code = getattr(schema().BuiltinOperator, kind)
        for n, c in enumerate(self.obj.operatorCodes):
            if max(c.builtinCode, c.deprecatedBuiltinCode) == code:
                return n
        new = objects().OperatorCodeT()
        new.builtinCode, new.deprecatedBuiltinCode, new.version = code, min(code, 127), 1
        self.obj.operatorCodes.append(new)
        self.kinds.append(kind)
        return len(self.obj.operatorCodes) - 1

    def set_op(self, n: int, kind: str, options_name: str, inputs: list[int]) -> None:
        """Op `n` becomes builtin `kind` with fresh options of type `options_name` ("SubOptions") reading `inputs`."""
        op = self.sg.operators[n]
        op.opcodeIndex = self.opcode(kind)
        op.builtinOptionsType = getattr(schema().BuiltinOptions, options_name)
        op.builtinOptions = getattr(objects(), f"{options_name}T")()
        op.inputs = np.array(inputs, np.int32)

    def bytes(self) -> bytes:
        """The edited model: tensors no op uses dropped, and the buffers of the constants an edit replaced emptied."""
        compact(self.obj)
        self.index()
        return write_model(self.obj)


# --- readers: plain values out, no tree ---------------------------------------------------------------------------

def op_outputs(model: bytes) -> list[tuple[str, str]]:
    """The main subgraph's ops as (name, its first output tensor's name), in execution order (ops without outputs
    left out)."""
    obj = read_model(model)
    return [(name, tensor_name(obj.subgraphs[0].tensors[outputs[0]])) for name, _, outputs in main_ops(obj)
            if outputs]


def ops_and_shapes(obj) -> tuple[list[tuple[str, list[int], list[int]]], list]:
    """The main subgraph's ops (`main_ops`) and each tensor's stored shape (None when the file has none)."""
    tensors = obj.subgraphs[0].tensors if obj.subgraphs else []
    return main_ops(obj), [t.shape for t in tensors]


def texts(model: bytes) -> list[tuple[str, object]]:
    """Every text a converter decodes, as stored (bytes or None): the description, tensor and subgraph names,
    signature keys and names, custom op codes, metadata names; read with the whole object API, so a damaged field raises here."""
    obj = schema().ModelT.InitFromPackedBuf(bytearray(model), 0)
    found = [("description", obj.description)]
    for sg in obj.subgraphs or []:
        found.append(("subgraph name", sg.name))
        found += [("tensor name", tensor.name) for tensor in sg.tensors or []]
    for sig in obj.signatureDefs or []:
        found.append(("signature key", sig.signatureKey))
        found += [("signature input or output name", item.name) for item in (sig.inputs or []) + (sig.outputs or [])]
    found += [("custom op name", code.customCode) for code in obj.operatorCodes or []]
    found += [("metadata name", meta.name) for meta in obj.metadata or []]
    return found


def stored_tensors(model) -> tuple[set, set, int]:
    """(the main subgraph's tensors holding constant data: inline, at an offset or external; its variable tensors;
    the number of subgraphs), read without unpacking the model."""
    m = schema().Model.GetRootAs(model, 0)
    sg = m.Subgraphs(0)
    constants, variables = set(), set()
    for i in range(sg.TensorsLength()):
        t = sg.Tensors(i)
        if t.IsVariable():
            variables.add(i)
            continue
        b = t.Buffer()
        data = False
        if 0 < b < m.BuffersLength():
            buf = m.Buffers(b)
            data = buf.DataLength() > 0 or buf.Offset() > 1
        if not data and getattr(t, "ExternalBuffer", None) is not None:
            data = t.ExternalBuffer() > 0
        if data:
            constants.add(i)
    return constants, variables, m.SubgraphsLength()


def float_activation_names(model: bytes) -> Optional[set[str]]:
    """The names of the main subgraph's float32 tensors the model computes (neither constant nor variable): those
    LiteRT Quantizer's calibration collects statistics for. None for a model of several subgraphs."""
    constants, variables, subgraphs = stored_tensors(model)
    if subgraphs != 1:
        return None
    sg, f32 = schema().Model.GetRootAs(model, 0).Subgraphs(0), schema().TensorType.FLOAT32
    return {sg.Tensors(i).Name().decode("utf-8", "replace") for i in range(sg.TensorsLength())
            if i not in constants and i not in variables and sg.Tensors(i).Type() == f32}


def subgraph_names(model: bytes) -> list[tuple[bytes, Optional[bytes], list, list[int]]]:
    """Each subgraph as (its name, the key of the first signature on it or None, its tensors' names, its ops'
    output tensors in op order), read without unpacking the model; names as stored (bytes or None)."""
    fb = schema().Model.GetRootAs(bytearray(model), 0)
    keys: dict = {}
    for i in range(fb.SignatureDefsLength()):
        sig = fb.SignatureDefs(i)
        keys.setdefault(sig.SubgraphIndex(), sig.SignatureKey())  # the first one only
    found = []
    for s in range(fb.SubgraphsLength()):
        sg = fb.Subgraphs(s)
        names = [sg.Tensors(t).Name() for t in range(sg.TensorsLength())]
        outputs = []
        for o in range(sg.OperatorsLength()):
            op = sg.Operators(o)
            outputs += [op.Outputs(j) for j in range(op.OutputsLength())]
        found.append((sg.Name(), keys.get(s), names, outputs))
    return found


def ops_by_output(obj, kinds) -> dict[str, tuple]:
    """Output tensor name -> (op type, op) of each op of `kinds` ("FULLY_CONNECTED", ...) of the main subgraph."""
    sg, found = obj.subgraphs[0], {}
    for op in sg.operators:
        kind = op_name(obj, op)
        if kind in kinds and len(op.outputs):
            found[tensor_name(sg.tensors[int(op.outputs[0])])] = (kind, op)
    return found


def input_names(model: bytes, kinds) -> set[str]:
    """The names of the tensors the ops of `kinds` read as their first input (main subgraph)."""
    obj = read_model(model)
    return {tensor_name(obj.subgraphs[0].tensors[int(op.inputs[0])]) for _, op in ops_by_output(obj, kinds).values()}


def output_quantize_count(model: bytes) -> int:
    """How many QUANTIZE ops make a host op's float output an int8 graph output (`quantized_host_outputs`)."""
    return len(quantized_host_outputs(read_model(model)))
