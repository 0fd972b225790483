"""The module paths of release 0.1 that moved into layer folders, kept for one release.

``import langchain_context_pipeline.pruner`` (and ``from ... import``) still work,
with a :class:`DeprecationWarning` naming the new path; the names they give are the
new modules' own objects, so ``isinstance`` checks and objects a checkpointer saved
under the old path keep working. To be removed in 0.3.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import sys
import types
import warnings
from collections.abc import Sequence
from typing import Any

MOVED: dict[str, str] = {
    "briefs": "stages.briefs",
    "calibration": "tokens.calibration",
    "carried": "stages.carried",
    "condenser": "stages.condenser",
    "digest": "stages.digest",
    "marks": "messages.marks",
    "pipeline": "core.pipeline",
    "pruner": "stages.pruner",
    "references": "messages.references",
    "replay": "core.replay",
    "report": "core.report",
    "settings": "stages.settings",
    "summary_memory": "stages.summary_memory",
    "threshold": "tokens.threshold",
    "truncate": "stages.truncate",
}
"""Old module (under the package) -> its new path (under the package)."""

_PACKAGE = __name__.rpartition(".")[0]


class _Forwarding(types.ModuleType):
    """A module that forwards every attribute to the module it moved to."""

    def __getattr__(self, name: str) -> Any:
        target = self.__dict__.get("_target")
        if target is None:  # still being imported
            raise AttributeError(name)
        return getattr(target, name)

    def __dir__(self) -> list[str]:
        target = self.__dict__.get("_target")
        return dir(target) if target is not None else []


class _MovedLoader(importlib.abc.Loader):
    def __init__(self, new: str) -> None:
        self._new = new

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> types.ModuleType:
        return _Forwarding(spec.name)

    def exec_module(self, module: types.ModuleType) -> None:
        warnings.warn(
            f"{module.__name__} moved to {self._new}; the old path will be removed in 0.3",
            DeprecationWarning,
            stacklevel=2,
        )
        target = importlib.import_module(self._new)
        module.__dict__["_target"] = target
        module.__dict__["__all__"] = list(getattr(target, "__all__", ()))
        module.__dict__["__doc__"] = f"Moved to :mod:`{self._new}`."


class _MovedFinder(importlib.abc.MetaPathFinder):
    def find_spec(
        self,
        fullname: str,
        path: Sequence[str] | None,
        target: types.ModuleType | None = None,
    ) -> importlib.machinery.ModuleSpec | None:
        parent, _, leaf = fullname.rpartition(".")
        if parent != _PACKAGE or leaf not in MOVED:
            return None
        return importlib.machinery.ModuleSpec(fullname, _MovedLoader(f"{_PACKAGE}.{MOVED[leaf]}"))


def install() -> None:
    """Put the finder of the moved paths on ``sys.meta_path`` (once)."""
    if not any(isinstance(finder, _MovedFinder) for finder in sys.meta_path):
        sys.meta_path.insert(0, _MovedFinder())
