"""The postprocess outputs' static shapes written into a .tflite: what TFLite Micro needs to read a detector's outputs.

The converter writes TFLite_Detection_PostProcess's four outputs (and the QUANTIZE/DEQUANTIZE outputs after
them, in an int8-I/O file) with shape []; LiteRT sizes them when it prepares the op, TFLite Micro reads the
file's shapes and returns one value per output. This helper (tests only, none of quant-report's code) writes
into the file the shapes LiteRT reports after allocate_tensors(), shape and shape_signature, with
tensorflow.lite.tools.flatbuffer_utils (which also inlines buffers stored after the flatbuffer).
"""

from __future__ import annotations

import numpy as np

POSTPROCESS = "TFLite_Detection_PostProcess"
PASS_THROUGH = ("QUANTIZE", "DEQUANTIZE")  # ops that keep their input's shape


def allocated_shapes(model: bytes) -> dict:
    """{tensor index: shape} of the main subgraph as LiteRT sizes it after allocate_tensors()."""
    from ai_edge_litert.interpreter import Interpreter, OpResolverType

    it = Interpreter(model_content=bytes(model),
                     experimental_op_resolver_type=OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES)
    it.allocate_tensors()
    return {d["index"]: [int(v) for v in d["shape"]] for d in it.get_tensor_details()}


def op_name(obj, op) -> str:
    """An operator's name: its custom code for a custom op (opcode_to_name says only CUSTOM)."""
    from tensorflow.lite.tools import flatbuffer_utils

    code = obj.operatorCodes[op.opcodeIndex]
    return code.customCode.decode() if code.customCode else flatbuffer_utils.opcode_to_name(obj, op.opcodeIndex)


def postprocess_outputs(obj) -> list[int]:
    """Tensor indices of every TFLite_Detection_PostProcess output of the main subgraph, and of the
    QUANTIZE/DEQUANTIZE outputs that carry them on, in op order."""
    found: list[int] = []
    for op in obj.subgraphs[0].operators:
        name = op_name(obj, op)
        if name == POSTPROCESS or (name in PASS_THROUGH and int(op.inputs[0]) in found):
            found += [int(t) for t in op.outputs]
    return found


def with_static_shapes(model: bytes) -> bytes:
    """`model` with each postprocess output's shape and shape_signature set to LiteRT's allocated shape."""
    from tensorflow.lite.tools import flatbuffer_utils

    shapes = allocated_shapes(model)
    obj = flatbuffer_utils.read_model_from_bytearray(bytearray(model))
    graph = obj.subgraphs[0]
    for index in postprocess_outputs(obj):
        shape = np.array(shapes[index], np.int32)
        graph.tensors[index].shape = shape
        graph.tensors[index].shapeSignature = shape.copy()
    return bytes(flatbuffer_utils.convert_object_to_bytearray(obj))
