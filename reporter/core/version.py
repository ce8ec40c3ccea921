"""The tool's version, recorded in every report and batch index, and TensorFlow's."""

__version__ = "0.1.0"


def tensorflow_version() -> str:
    """TensorFlow's version: the imported module's, else the installed distribution's (a float .tflite's run imports
    no TensorFlow)."""
    import sys
    from importlib import metadata

    if "tensorflow" in sys.modules:
        return sys.modules["tensorflow"].__version__
    for dist in ("tensorflow", "tensorflow-cpu", "tf-nightly"):
        try:
            return metadata.version(dist)
        except metadata.PackageNotFoundError:
            continue
    import tensorflow as tf  # installed under another name

    return tf.__version__
