"""Claim outputs and a backend that write every call into one log, to test the stages' order.

:class:`MarkerOutput` is an output of the kind a new one would be: a file per claim on the
node, container edits naming it, a field in the checkpoint record, and work for after the
commit. :class:`Traced` wraps any output (the standard ones too) and logs its calls.
"""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from claims import DRIVER, NODE

from drakit.backends.example import ExampleBackend
from drakit.node_plugin.cdi import CDISpecs
from drakit.node_plugin.checkpoint import FILE_NAME, ClaimEntry, read_document
from drakit.node_plugin.device_metadata import MetadataFiles
from drakit.node_plugin.driver import PluginConfig
from drakit.node_plugin.prepare.draft import Draft, RequestEdits
from drakit.node_plugin.prepare.output import AfterCommit, ClaimOutput
from drakit.node_plugin.prepare.outputs import standard_outputs
from drakit.plugin import (
    BackendContext,
    BackendPrepared,
    ClaimRef,
    ClaimToPrepare,
    ContainerEdits,
    RequestContext,
)
from drakit.telemetry.logs import StructuredLogger

#: One entry per call: (what, whose, details...).
Calls = list[tuple[Any, ...]]


def saved_state(config: PluginConfig, uid: str) -> str | None:
    """The claim's state in the checkpoint files (None: no entry), as a restart would read it."""
    claims = read_document(config.plugin_data_dir / FILE_NAME)["claims"]
    return claims[uid]["state"] if uid in claims else None


class MarkerOutput(ClaimOutput):
    """One file per claim in ``folder``. ``fail`` makes ``write`` fail: "claim" with the
    claim's error, "bug" with an exception no output should raise; ``kill`` SIGKILLs the
    process inside ``write``."""

    def __init__(
        self,
        config: PluginConfig,
        calls: Calls,
        *,
        title: str = "marker",
        fail: str = "",
        kill: bool = False,
    ) -> None:
        self.config = config
        self.calls = calls
        self.title = title
        self.folder = config.plugin_data_dir / title
        self.fail = fail
        self.kill = kill

    def write(self, draft: Draft) -> AfterCommit | None:
        self.calls.append(("write", self.title))
        if self.kill:
            os.kill(os.getpid(), signal.SIGKILL)
        if self.fail == "claim":
            raise draft.failure("PrepareFailed", f"{self.title}: the disk is on fire")
        if self.fail == "bug":
            raise RuntimeError(f"{self.title}: the disk is on fire")
        self.folder.mkdir(exist_ok=True)
        (self.folder / draft.uid).write_text(self.title)
        draft.record[self.title] = "written"
        request = draft.claim.to_prepare.devices[0].request
        edits = ContainerEdits(env=(f"MARKER={self.folder / draft.uid}",))
        draft.request_edits.append(RequestEdits(request, f"{draft.uid}-{self.title}", edits))
        uid = draft.uid

        def after(log: StructuredLogger) -> None:
            self.calls.append(("after commit", self.title, saved_state(self.config, uid)))

        return after

    def roll_back(self, uid: str) -> None:
        self.calls.append(("roll_back", self.title))
        (self.folder / uid).unlink(missing_ok=True)

    def forget(self, claim: ClaimRef, entry: ClaimEntry | None) -> AfterCommit | None:
        self.calls.append(("forget", self.title, entry.state if entry else None))
        (self.folder / claim.uid).unlink(missing_ok=True)

        def after(log: StructuredLogger) -> None:
            self.calls.append(("after unprepare", self.title, saved_state(self.config, claim.uid)))

        return after

    def in_place(self, entry: ClaimEntry) -> bool:
        return (self.folder / entry.uid).exists()

    def leftovers(self) -> Iterator[str]:
        return (p.name for p in self.folder.iterdir()) if self.folder.is_dir() else iter(())


class Traced(ClaimOutput):
    """``inner``, with every call it gets logged in ``calls`` (by ``inner``'s title)."""

    def __init__(self, inner: ClaimOutput, calls: Calls) -> None:
        self.inner = inner
        self.calls = calls
        self.title = inner.title

    def write(self, draft: Draft) -> AfterCommit | None:
        self.calls.append(("write", self.title))
        return self.inner.write(draft)

    def roll_back(self, uid: str) -> None:
        self.calls.append(("roll_back", self.title))
        self.inner.roll_back(uid)

    def forget(self, claim: ClaimRef, entry: ClaimEntry | None) -> AfterCommit | None:
        self.calls.append(("forget", self.title, entry.state if entry else None))
        return self.inner.forget(claim, entry)

    def in_place(self, entry: ClaimEntry) -> bool:
        return self.inner.in_place(entry)

    def leftovers(self) -> Iterator[str]:
        return iter(self.inner.leftovers())

    def recorded(self) -> Iterator[ClaimEntry]:
        return iter(self.inner.recorded())


def outputs_with(config: PluginConfig, calls: Calls, *added: ClaimOutput) -> list[ClaimOutput]:
    """The standard outputs (traced into ``calls``), ``added`` just before the CDI spec."""
    standard = standard_outputs(
        DRIVER,
        CDISpecs(config.cdi_root, DRIVER),
        MetadataFiles(config.plugin_data_dir, DRIVER),
        None,
        None,
    )
    traced: list[ClaimOutput] = [Traced(o, calls) for o in standard]
    return [*traced[:-1], *added, traced[-1]]


class TracedBackend(ExampleBackend):
    """The example backend (with device metadata), logging its calls; each prepare returns
    a new token in its state."""

    def __init__(self, calls: Calls, config: Mapping[str, Any]) -> None:
        super().__init__(BackendContext(DRIVER, NODE, {**config, "deviceMetadata": True}))
        self.calls = calls
        self.prepares = 0

    def prepare(self, claim: ClaimToPrepare, context: RequestContext) -> BackendPrepared:
        self.prepares += 1
        self.calls.append(("backend prepare",))
        prepared = super().prepare(claim, context)
        state = {**prepared.state, "token": f"t{self.prepares}"}
        return BackendPrepared(
            prepared.device_edits, state, device_metadata=prepared.device_metadata
        )

    def unprepare(self, claim: ClaimRef, state: Mapping[str, Any], context: RequestContext) -> None:
        self.calls.append(("backend unprepare", state.get("token")))
        super().unprepare(claim, state, context)


def titles(outputs: Sequence[ClaimOutput]) -> list[str]:
    return [o.title for o in outputs]
