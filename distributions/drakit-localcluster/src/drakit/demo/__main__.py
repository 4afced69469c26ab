"""``python -m drakit.demo``."""

import sys

from drakit.demo.flow import main

sys.exit(main())
