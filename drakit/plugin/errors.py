"""The exceptions a backend raises, and what the plugin raises for them."""

from __future__ import annotations


class BackendError(Exception):
    """A backend could not prepare or unprepare; the message names device and reason.

    The core turns it into a per-claim error (and an Event on the claim).
    """


class BackendConfigError(Exception):
    """The backend's own configuration (``--backend-config``) is unusable.

    The message must name the file, the field and the reason; the plugin
    prints it and exits non-zero.
    """
