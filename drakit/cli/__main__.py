"""``python -m drakit.cli``: the same as the ``drakit`` console script."""

import sys

from drakit.cli import main

sys.exit(main())
