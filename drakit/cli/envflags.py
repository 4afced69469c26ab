"""Command-line flags with environment-variable twins.

Every drakit flag can also be set through an environment variable (the
DaemonSet and Deployment pass settings that way). A flag on the command line
wins over the variable; an empty variable counts as unset. The help text of
each flag names its variable.
"""

from __future__ import annotations

import argparse
import os
from typing import Any


class EnvDefault(argparse.Action):
    """An argparse action whose default comes from the environment variable ``env``.

    A ``required`` flag is satisfied by its variable. With ``nargs=0`` the flag
    is a switch: present means True.
    """

    def __init__(
        self, env: str, required: bool = False, default: Any = None, **kwargs: Any
    ) -> None:
        value = os.environ.get(env)
        default = value if value not in (None, "") else default
        kwargs["help"] = f"{kwargs.pop('help', '')} [env {env}]"
        super().__init__(default=default, required=required and default is None, **kwargs)

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: Any,
        option_string: str | None = None,
    ) -> None:
        setattr(namespace, self.dest, True if self.nargs == 0 else values)
