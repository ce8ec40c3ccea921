"""What a target tool's own figures add to the views and the words: one module per tool, registered by name."""

from reporter.render.tools import micro, vela  # noqa: F401 - the built-in tools' words register
from reporter.render.tools.words import (SOURCE, ToolWords, every, fine_share, grouped, held, of,  # noqa: F401
                                         register, unregister)
