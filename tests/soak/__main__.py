"""``python -m soak`` (run from tests/, or with tests/ on PYTHONPATH): the chaos soak.

See ``--help``; ``make soak DURATION=30m SEED=7`` is the usual way to call it.
"""

from __future__ import annotations

import sys

from soak.cli import main

sys.exit(main())
