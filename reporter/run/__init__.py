"""One model, end to end: settings, inputs, the pipeline's stages, progress, the demo."""
