"""One model, end to end: the stages in order, the context they share, the on-target checks and the demo."""
