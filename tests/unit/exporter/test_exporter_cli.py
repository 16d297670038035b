"""`gpudash exporter`'s command line: one-line errors for bad flags and files, the field list."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from support.cli import Ran, gpudash
from support.paths import ROOT


def _run(root: Path, *args: str) -> Ran:
    return gpudash("exporter", *args, cwd=root)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--fault", "1=leak"], "gpudash: --workload and --fault need --simulate N\n"),
        (["--simulate", "2", "--fault", "5=leak"], "gpudash: GPU index 5 out of range: the simulated node has GPUs"),
        (["--simulate", "2", "--fault", "1=boil"], "gpudash: --fault '1=boil': unknown fault 'boil'; expected"),
        (["--simulate", "2", "--interval", "fast"], "gpudash: --interval 'fast': expected a duration"),
        (["--simulate", "2", "--listen", "nowhere"], "gpudash: --listen 'nowhere': expected [HOST]:PORT"),
        (["--simulate", "2", "--listen", ":\uff19\uff14\uff10\uff10"], "gpudash: --listen ':\uff19\uff14\uff10\uff10': "
                                                                        "expected [HOST]:PORT"),
        (["--simulate", "2", "--listen", ":94\u00b2"], "gpudash: --listen ':94\u00b2': expected [HOST]:PORT"),
        (["--simulate", "2", "--workload", "\uff11=idle"], "gpudash: --workload '\uff11=idle': expected IDX=NAME"),
        (["--simulate", "2", "-f", "/no/such.csv"], "gpudash: /no/such.csv: cannot read collectors file"),
        (["--simulate", "2", "--fault", "1=nvlink-crc-storm:fast"], "gpudash: --fault '1=nvlink-crc-storm:fast': bad"),
        (["--simulate", "2", "--xid-count-window-size", "5m"], "gpudash: --xid-count-window-size '5m': expected a "
                                                               "whole number from 1 to 86400000\n"),
        (["--simulate", "2", "--expected-gpus", "-1"], "gpudash: --expected-gpus '-1': expected a whole number"),
    ],
)
def test_bad_flags_are_one_line_and_exit_2(root: Path, args: list[str], message: str) -> None:
    done = _run(root, *args)
    assert done.code == 2
    assert done.err.startswith(message) and done.err.count("\n") == 1, done.err


def test_unknown_counter_field_is_a_clear_error_at_start(root: Path, tmp_path: Path) -> None:
    csv = tmp_path / "counters.csv"
    csv.write_text("DCGM_FI_DEV_GPU_UTIL, gauge, util\nDCGM_FI_DEV_MADE_UP, gauge, nope\n")
    done = _run(root, "--simulate", "1", "-f", str(csv))
    assert done.code == 2
    assert done.err == f"gpudash: {csv}:2: unknown field 'DCGM_FI_DEV_MADE_UP': the exporter cannot read it " \
                          "(`gpudash exporter --list-fields` shows the fields it can)\n"


def test_list_fields(root: Path) -> None:
    done = _run(root, "--list-fields")
    assert done.code == 0
    assert "DCGM_FI_DEV_FB_USED" in done.out and "gpudash_gpu_up" in done.out
    rows = {line.split()[0]: line.split()[1:] for line in done.out.splitlines()[1:]}
    assert rows["DCGM_EXP_XID_ERRORS_COUNT"] == ["gauge", "1", "dcgm-optional"]  # windowed, as dcgm-exporter 4.8
    assert rows["DCGM_EXP_XID_ERRORS_TOTAL"] == ["counter", "1", "dcgm-optional"]
    assert rows["DCGM_FI_DEV_ROW_REMAP_PENDING"] == ["gauge", "1", "dcgm-optional"]
    assert rows["DCGM_FI_DEV_THERMAL_VIOLATION"] == ["counter", "ns", "dcgm-optional"]
    assert rows["gpudash_nvlink_errors_total"] == ["counter", "1", "gpudash"]
    assert rows["gpudash_node_gpus_expected"] == ["gauge", "1", "gpudash"]


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"basic_auth_users:\n  caf\xe9: x\n", "not UTF-8 text"),
        (b"a: &a [x, x]\nb: &b [*a, *a]\n", "line 1, column 4: anchors (&a) are not accepted in a config file"),
    ],
)
def test_an_unreadable_web_config_is_one_line_and_exit_2(root: Path, tmp_path: Path, content: bytes,
                                                          message: str) -> None:
    config = tmp_path / "web.yml"
    config.write_bytes(content)
    done = _run(root, "--simulate", "1", "--web-config", str(config))
    assert done.code == 2
    assert done.err == f"gpudash: {config}: {message}\n"



def _top_level_imports(module: str) -> set[str]:
    """The gpudash modules `module` imports when it is imported (function-level imports left out), recursively."""
    seen: set[str] = set()
    todo = [module]
    while todo:
        name = todo.pop()
        path = ROOT.joinpath(*name.split("."))
        path = path / "__init__.py" if path.is_dir() else path.with_suffix(".py")
        if name in seen or not path.is_file():
            continue
        seen.add(name)
        for node in ast.parse(path.read_text()).body:
            names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                     else [node.module or ""] + [f"{node.module}.{a.name}" for a in node.names]
                     if isinstance(node, ast.ImportFrom) else [])
            todo += [n for n in names if n.startswith("gpudash")]
    return seen


def test_a_gpu_node_never_loads_the_simulator() -> None:
    # about 1 MiB of the exporter's memory (bench/exporter_memory.py): only --simulate imports it
    loaded = _top_level_imports("gpudash.exporter.cli")
    assert "gpudash.exporter.poller" in loaded  # the walk follows the imports
    assert not {m for m in loaded if m.startswith("gpudash.exporter.sim")}


def test_fault_help_lists_every_fault_the_simulator_accepts(tmp_path: Path) -> None:
    from gpudash.exporter.sim.spec import ALL_FAULTS, FAULT_ARGS, parse_fault

    ran = _run(tmp_path, "--help")
    assert ran.code == 0, ran.err
    # the --fault paragraph, rewrapped: from its metavar to the next option
    text = ran.out.split("--fault [NODE/]IDX=KIND[:ARG][@START][+DURATION]", 1)[1].split("\n  --", 1)[0]
    words = "".join(text.split())
    for kind in ALL_FAULTS:
        listed = f"{kind}[:{FAULT_ARGS[kind]}]" if kind in FAULT_ARGS else kind
        assert listed in words, f"--fault's help does not list {kind}"
        assert parse_fault(f"0={kind}")[1].kind == kind  # and each listed kind parses
    assert set(FAULT_ARGS) <= set(ALL_FAULTS)
    assert {"ib-down", "ib-flap", "ib-congested", "ib-degraded", "ib-symbol-burst", "fabric-failure"} <= set(ALL_FAULTS)
