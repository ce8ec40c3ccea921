"""Per-layer error: the Quantization Debugger, tensor-by-tensor comparison with float, blame and its fix, overlays."""
