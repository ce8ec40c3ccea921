"""Measuring a built model: inference and latency, metrics, structure from the flatbuffer, what the output means."""
