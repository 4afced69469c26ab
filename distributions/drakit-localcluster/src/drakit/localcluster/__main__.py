"""``python -m drakit.localcluster``: the same as ``drakit local-cluster``."""

import sys

from drakit.cli import main

sys.exit(main(["local-cluster", *sys.argv[1:]]))
