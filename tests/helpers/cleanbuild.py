"""An environment for building drakit's wheels from the source tree as a clean checkout would.

setuptools builds a wheel from a source folder through that folder's ``build/lib`` and copies
all of it into the wheel, so a module that an earlier build saw and that has since been moved
out (drakit.localcluster, drakit.demo: the drakit-localcluster distribution's) would still be
shipped. ``DIST_EXTRA_CONFIG`` (read by setuptools, also inside pip's and build's isolated
build environments) points the build folder at a new one in ``work``.
"""

from __future__ import annotations

import os
from pathlib import Path


def clean_build_env(work: Path) -> dict[str, str]:
    """os.environ plus a setuptools config whose build folder is new, inside ``work``."""
    work.mkdir(parents=True, exist_ok=True)
    config = work / "setuptools-build.cfg"
    config.write_text(f"[build]\nbuild_base = {work / 'setuptools-build'}\n")
    return {**os.environ, "DIST_EXTRA_CONFIG": str(config)}
