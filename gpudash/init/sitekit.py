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
from gpudash.config.site_identity import new_site_id
from gpudash.errors import OutputError
from gpudash.files import write_tree

if sys.version_info >= (3, 11):
    from importlib.resources.abc import Traversable
else:  # pragma: no cover - Python 3.10
    from importlib.abc import Traversable

VERSION_MARK = "@GPUDASH_VERSION@"
SITE_ID_MARK = "@GPUDASH_SITE_ID@"  # in gpudash.yaml: a new site id for each site made
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


def site_files(root: Traversable | None = None, site_id: str = "") -> dict[str, bytes]:
    """Every file a new site gets, by path relative to the site's folder; gpudash.yaml names `site_id` (by
    default a new one)."""
    root = root or template()
    site_id = site_id or new_site_id("gpu")
    files = {dest: root.joinpath(src).read_bytes() for dest, src in FIXED_FILES.items()}
    for definition in sorted(root.joinpath("dashboards").iterdir(), key=lambda t: t.name):
        if definition.name.endswith(".py") and definition.is_file():
            files[f"dashboards/{definition.name}"] = definition.read_bytes()
    marks = ((VERSION_MARK, __version__), (SITE_ID_MARK, site_id))
    for mark, value in marks:
        files = {rel: data.replace(mark.encode(), value.encode()) for rel, data in files.items()}
    return files


def init_site(folder: Path, files: dict[str, bytes] | None = None) -> InitOutcome:
    """Write the files that are not in `folder` yet, all or nothing; keep every file that is there."""
    files = site_files(site_id=new_site_id(folder.resolve().name)) if files is None else files
    if folder.exists() and not folder.is_dir():
        raise OutputError(f"{folder}: cannot create a site there: not a directory")
    missing = {rel: data for rel, data in files.items() if not _present(folder / rel)}
    kept = tuple(folder / rel for rel in sorted(files) if rel not in missing)
    written = write_tree(folder, missing) if missing else []
    return InitOutcome(tuple(written), kept)


def _present(path: Path) -> bool:
    # A dangling link or a folder in a file's place counts as present: it is someone's, and stays.
    return path.exists() or path.is_symlink()
