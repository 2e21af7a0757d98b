"""`python -m scripts COMMAND ...`: the same as `suite COMMAND ...` (scripts/cli.py)."""

import sys

from scripts.cli import main

sys.exit(main())
