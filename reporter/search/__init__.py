"""The measured search for layers to keep in float, and the recommendation it leads to."""
