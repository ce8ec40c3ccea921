"""`python -m reporter` runs the command line, exactly like `quant-report`."""

from reporter.cli import entry

entry()
