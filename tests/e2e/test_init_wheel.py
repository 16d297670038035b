"""The built wheel on its own: installed into a fresh virtualenv, `gpudash init` makes a site in an empty
folder outside the checkout, and dashboards, rules and both `--check`s work there.

The wheel is built from a copy of the checkout (pip's build isolation fetches setuptools from the package
index) and installed without dependencies; the fresh virtualenv reaches the current one's third-party
packages through a .pth file, so the test stays fast, while gpudash itself and everything `init` copies
can only come from the wheel. The checkout is not on the path and is never the working directory.
"""

from __future__ import annotations

import os
import shutil
import site
import subprocess
import sys
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

from support.paths import ROOT
from support.slack import budget

_NOT_SOURCE = shutil.ignore_patterns(".git", ".venv", "build", "dist", "*.egg-info", "__pycache__", ".*_cache",
                                     ".bench", ".demo", "generated", "json")


def _setuptools_major() -> int:
    try:
        return int(version("setuptools").split(".")[0])
    except PackageNotFoundError:
        return 0


def _run(*args: str | Path, cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    done = subprocess.run([str(a) for a in args], cwd=cwd, env=env, capture_output=True, text=True, timeout=budget(240),
                          check=False)
    assert done.returncode == 0, f"{args}: {done.stdout}\n{done.stderr}"
    return done


def test_wheel_init_generate_and_check_with_nothing_from_the_checkout(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "GPUDASH_", "VIRTUAL_ENV"))}
    env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    source = tmp_path / "source"
    shutil.copytree(ROOT, source, symlinks=True, ignore=_NOT_SOURCE)
    # Offline when this environment has a setuptools that builds it; else pip fetches one (build isolation).
    isolation = ["--no-build-isolation"] if _setuptools_major() >= 77 else []
    _run(sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", *isolation, "--wheel-dir", tmp_path / "dist",
         source, cwd=tmp_path, env=env)
    (wheel,) = (tmp_path / "dist").glob("gpudash-*.whl")

    venv = tmp_path / "venv"
    _run(sys.executable, "-m", "venv", "--without-pip", venv, cwd=tmp_path, env=env)
    python = venv / "bin" / "python"
    _run(sys.executable, "-m", "pip", "--python", python, "install", "--quiet", "--no-deps", wheel, cwd=tmp_path,
         env=env)
    # Third-party packages from the current environment, after the fresh one's own (which holds gpudash).
    purelib = Path(_run(python, "-c", "import sysconfig; print(sysconfig.get_path('purelib'))", cwd=tmp_path,
                        env=env).stdout.strip())
    (purelib / "zz-test-dependencies.pth").write_text("\n".join(site.getsitepackages()) + "\n")
    where = _run(python, "-c", "import gpudash; print(gpudash.__file__)", cwd=tmp_path, env=env).stdout.strip()
    assert Path(where).is_relative_to(venv), where

    gpudash = venv / "bin" / "gpudash"
    work = tmp_path / "elsewhere"
    work.mkdir()
    _run(gpudash, "init", "site", cwd=work, env=env)
    site_dir = work / "site"
    assert (site_dir / "thresholds.yaml").read_bytes() == (ROOT / "thresholds.yaml").read_bytes()
    for args in (["dashboards"], ["rules", "--format", "all"], ["dashboards", "--check"],
                 ["rules", "--format", "all", "--check"]):
        _run(gpudash, *args, cwd=site_dir, env=env)
    assert sorted(p.name for p in (site_dir / "dashboards" / "json").glob("*.json")) == \
        sorted(p.name for p in (ROOT / "dashboards" / "json").glob("*.json"))
    rules = (site_dir / "generated" / "kubernetes" / "prometheus-rules.yaml").read_text()
    assert "kind: PrometheusRule" in rules
    # A changed threshold makes the committed output stale: the check is real.
    thresholds = site_dir / "thresholds.yaml"
    thresholds.write_text(thresholds.read_text().replace("gpu_critical_celsius: 85", "gpu_critical_celsius: 86"))
    stale = subprocess.run([str(gpudash), "rules", "--format", "all", "--check"], cwd=site_dir, env=env,
                           capture_output=True, text=True, timeout=budget(120), check=False)
    assert stale.returncode == 1 and "prometheus-rules.yaml" in stale.stderr
