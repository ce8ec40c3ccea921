"""quant-report: what int8 quantization did to a TensorFlow model, and how to fix it."""

__version__ = "0.1.0"
