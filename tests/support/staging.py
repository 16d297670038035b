"""Making one step of gpudash's all-or-nothing write fail, as a full disk or a refused write would."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from gpudash import journal


def oserror(code: int) -> OSError:
    return OSError(code, os.strerror(code))


def fail_staging(monkeypatch: pytest.MonkeyPatch, name: str | None, error: OSError) -> None:
    """Make staging the file called `name` fail with `error` (any file gpudash creates, the journal first, when
    `name` is None); the others go through."""
    real = journal._write_new

    def patched(path: Path, *args: Any) -> None:
        if name is None or path.name.startswith(f".{name}."):
            raise error
        real(path, *args)

    monkeypatch.setattr(journal, "_write_new", patched)
