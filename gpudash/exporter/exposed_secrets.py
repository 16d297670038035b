"""A secret the exporter reads from a file (the TLS private key, a Kubernetes API token) should be readable by
the exporter's user and group only: one warning at start names a file any user may read or write, and its mode.

The web config itself holds bcrypt hashes, which are made to be stored, so its mode is not checked.
"""

from __future__ import annotations

import logging
import os
import stat
from pathlib import Path

log = logging.getLogger("gpudash.exporter")


def exposure(mode: int) -> str | None:
    """What every user of the machine may do with a file of this mode, or None when they may do neither."""
    readable, writable = bool(mode & stat.S_IROTH), bool(mode & stat.S_IWOTH)
    if readable and writable:
        return "readable and writable"
    return "readable" if readable else "writable" if writable else None


def warn_if_exposed(path: Path, what: str) -> bool:
    """Warn (and say True) when every user may read or write ``path``; a file that cannot be stat'ed is left to
    the code that reads it to report."""
    try:
        mode = os.stat(path).st_mode
    except (OSError, ValueError):
        return False
    exposed = exposure(mode)
    if exposed is None:
        return False
    log.warning("%s: the %s is %s by every user (mode %04o); make it 0600, or 0640 with the exporter's group",
                path, what, exposed, stat.S_IMODE(mode))
    return True
