"""`python -m reporter` runs the command line, exactly like `quant-report`."""

import sys

from reporter.cli import main

sys.exit(main())
