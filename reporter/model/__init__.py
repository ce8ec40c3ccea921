"""The report's data model: typed records that save to report.json and load back (no TensorFlow)."""
