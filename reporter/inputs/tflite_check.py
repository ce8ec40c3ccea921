"""A .tflite file handed to quant-report, tried in a child process under a memory ceiling before anything else
reads it.

A damaged flatbuffer (a few bytes changed) can pass every cheap check and then make a parser allocate
gigabytes, abort the interpreter, or raise a decode error deep inside a converter. The child parses the whole
model (every table, string and vector, as LiteRT Quantizer does), builds the interpreter, allocates its tensors
and runs it once on zeros; the parent waits with a time limit. Whatever goes wrong there becomes one line
naming the file, and the run stops before any report is written. The child (reporter.core.children) imports
neither TensorFlow nor the rest of quant-report.
"""

from __future__ import annotations

from pathlib import Path
from typing import Optional

BASE_MEMORY = 3 << 30  # bytes of address space for the interpreter, numpy and the parser
PER_MODEL_BYTE = 40  # and this many per byte of the model (parsed objects, arena, outputs)
BASE_SECONDS = 120
OK = "ok"


def problem(path: Path) -> Optional[str]:
    """None when the model parses and runs once in the child; else what went wrong, in a few words."""
    from reporter.core import children

    size = path.stat().st_size
    limit = BASE_MEMORY + PER_MODEL_BYTE * size
    try:
        found = children.run_once(_check, str(path), limit, timeout=BASE_SECONDS + size / 1e6,
                                  what="the TFLite interpreter")
    except children.TimedOut:
        return f"the TFLite interpreter did not finish loading and running it once in {BASE_SECONDS} s"
    except children.Crashed as crash:
        if any("MemoryError" in line or "bad_alloc" in line for line in crash.tail):
            return f"reading it needs more than {limit / (1 << 30):.1f} GB of memory (a damaged size or length field)"
        if crash.how.startswith("SIG"):
            return f"the TFLite interpreter crashed on it ({crash.how})"
        return f"the TFLite interpreter failed on it: {crash.tail[-1][:200] if crash.tail else crash.how}"
    return None if found == OK else found


def _check(path: str, limit: int) -> str:
    import resource

    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    data = Path(path).read_bytes()
    what = "name"
    try:
        from reporter.measure import graph

        for what, name in graph.texts(data):
            if isinstance(name, bytes):
                name.decode("utf-8")
    except MemoryError:
        return f"reading it needs more than {limit / (1 << 30):.1f} GB of memory (a damaged size or length field)"
    except UnicodeDecodeError as exc:
        return f"a {what} in it is not valid UTF-8 (byte {exc.start}): the file is damaged"
    except Exception as exc:  # noqa: BLE001 - any parse failure means a damaged flatbuffer
        return f"the flatbuffer is damaged: {type(exc).__name__}: {str(exc).splitlines()[0][:120] if str(exc) else ''}"
    try:
        import numpy as np
        from reporter.measure import runtime

        interpreter = runtime.load(data)
        interpreter.allocate_tensors()
        for detail in interpreter.get_input_details():
            shape = [max(1, int(d)) for d in detail["shape_signature"]] if len(detail["shape_signature"]) else []
            interpreter.resize_tensor_input(detail["index"], shape)
        interpreter.allocate_tensors()
        details = interpreter.get_input_details()
        if all(np.issubdtype(d["dtype"], np.number) or d["dtype"] == np.bool_ for d in details):
            for detail in details:  # zeros (id 0 for an integer input): a valid model runs on them
                interpreter.set_tensor(detail["index"], np.zeros(detail["shape"], detail["dtype"]))
            interpreter.invoke()
    except MemoryError:
        return f"running it needs more than {limit / (1 << 30):.1f} GB of memory (a damaged shape)"
    except Exception as exc:  # noqa: BLE001 - the interpreter raises RuntimeError/ValueError for a bad model
        from reporter.measure import structure

        found = structure.weight_zero_point(data)  # the first cause found in the file, in the user's terms
        said = found or (str(exc).splitlines()[0][:160] if str(exc) else type(exc).__name__)
        return f"the TFLite interpreter cannot run it: {said}"
    return OK
