"""The flatbuffer tree is walked and edited by reporter/measure/graph.py alone: issue 64's "one flatbuffer editor",
counted by benchmarks/flatbuffer_counts.py."""

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_only_the_graph_module_walks_the_flatbuffer_tree():
    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        import flatbuffer_counts
    finally:
        sys.path.remove(str(ROOT / "benchmarks"))
    found = flatbuffer_counts.counts(ROOT)
    # structure.py: the read-only summaries (op and type counts, weight coverage); detection.py: the kind's
    # postprocess options (flexbuffers), being moved by the kind's own work.
    assert set(found) <= {"measure/structure.py", "measure/kinds/detection.py"}, found

