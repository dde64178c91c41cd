# PYTHON_ARGCOMPLETE_OK: argcomplete completes `python -m ops` (docs/operating.md, "Shell completion")
"""``python -m ops``: the operator CLI (ops/cli.py)."""

import sys

from ops.cli import main

if __name__ == "__main__":
    sys.exit(main())
