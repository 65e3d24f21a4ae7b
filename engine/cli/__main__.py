"""`python -m engine.cli`: the command line without the console (what `start` runs)."""

import sys

from engine.cli import main

if __name__ == "__main__":
    sys.exit(main())
