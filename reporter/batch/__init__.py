"""Many models: the batch config, the local pool and Ray executors, the index."""
