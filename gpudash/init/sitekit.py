"""What `gpudash init` copies into a site repository, and the copying, which never overwrites anything.

The package ships the starting point (gpudash/init/template/): thresholds.yaml and a commented
gpudash.yaml, the dashboard definitions (the site owns them from then on), a Makefile, a pinned
requirements.txt and a CI workflow. thresholds.yaml and the definitions are the repository's own files,
so a site starts from exactly what this version of gpudash generates and tests.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from gpudash import __version__
from gpudash.errors import OutputError
from gpudash.files import write_tree

if sys.version_info >= (3, 11):
    from importlib.resources.abc import Traversable
else:  # pragma: no cover - Python 3.10
    from importlib.abc import Traversable

VERSION_MARK = "@GPUDASH_VERSION@"
# destination in the site repository -> file in the template (a dotted name would not survive packaging)
FIXED_FILES = {
    "thresholds.yaml": "thresholds.yaml",
    "gpudash.yaml": "gpudash.yaml",
    "Makefile": "Makefile",
    "requirements.txt": "requirements.txt",
    ".github/workflows/gpudash.yml": "github-workflow.yml",
    ".gitignore": "gitignore",
}


@dataclass(frozen=True)
class InitOutcome:
    written: tuple[Path, ...]
    kept: tuple[Path, ...]  # already there, left exactly as they were


def template() -> Traversable:
    return resources.files("gpudash.init").joinpath("template")


def site_files(root: Traversable | None = None) -> dict[str, bytes]:
    """Every file a new site gets, by path relative to the site's folder."""
    root = root or template()
    files = {dest: root.joinpath(src).read_bytes() for dest, src in FIXED_FILES.items()}
    for definition in sorted(root.joinpath("dashboards").iterdir(), key=lambda t: t.name):
        if definition.name.endswith(".py") and definition.is_file():
            files[f"dashboards/{definition.name}"] = definition.read_bytes()
    return {rel: data.replace(VERSION_MARK.encode(), __version__.encode()) for rel, data in files.items()}


def init_site(folder: Path, files: dict[str, bytes] | None = None) -> InitOutcome:
    """Write the files that are not in `folder` yet, all or nothing; keep every file that is there."""
    files = site_files() if files is None else files
    if folder.exists() and not folder.is_dir():
        raise OutputError(f"{folder}: cannot create a site there: not a directory")
    missing = {rel: data for rel, data in files.items() if not _present(folder / rel)}
    kept = tuple(folder / rel for rel in sorted(files) if rel not in missing)
    written = write_tree(folder, missing) if missing else []
    return InitOutcome(tuple(written), kept)


def _present(path: Path) -> bool:
    # A dangling link or a folder in a file's place counts as present: it is someone's, and stays.
    return path.exists() or path.is_symlink()
