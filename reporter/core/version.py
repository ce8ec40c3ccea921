"""The tool's version, recorded in every report and batch index."""

__version__ = "0.1.0"
