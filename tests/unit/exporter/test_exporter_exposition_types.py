"""The exporter's `# TYPE` lines against dcgm-exporter's declared types, for every name both publish."""

from __future__ import annotations

import re
from pathlib import Path

from support.dcgm_types import declared_48, declared_types
from support.exposition import full_simulated_output

from gpudash.catalog import BY_DCGM_NAME


def test_type_lines_match_dcgm_exporter_for_every_shared_name(reference: Path) -> None:
    typed = dict(re.findall(r"^# TYPE (\S+) (\S+)$", full_simulated_output(), re.MULTILINE))
    declared = declared_types(reference)
    shared = typed.keys() & declared.keys()
    assert len(shared) > 40 and set(declared_48(reference)) <= shared  # dcgm-exporter's own fields included
    assert {name: (typed[name], declared[name]) for name in shared if typed[name] != declared[name]} == {}


def test_dcgm_exporter_own_fields_carry_its_help_and_types(reference: Path) -> None:
    for name, (kind, help_) in declared_48(reference).items():
        signal = BY_DCGM_NAME[name]
        assert (signal.type, signal.help) == (kind, help_), name
