"""`python -m console`: the same as `agentdeck`."""

import sys

from console.cli import main

sys.exit(main())
