"""What a task kind's own figures (reporter.model.figures: `Metrics.figures`) add to the quality views: its rows.

A kind's view module (one per kind that declares figures) builds a `FigureRows` (reporter.render.kinds.rows) and
registers it in one line, `register(name, FigureRows(...))`, under the kind's name; the quality view asks for
every kind whose figures a variant holds and lays out what it gives, never naming a kind.
"""

from reporter.render.kinds import detection, keypoints, segmentation  # noqa: F401 - the built-in kinds' rows register
from reporter.render.kinds.rows import FigureRows, of, register, shown, unregister

__all__ = ["FigureRows", "of", "register", "shown", "unregister"]
