"""A simulated GPU partitioned with MIG: ``--sim-mig IDX=PROFILE[,PROFILE...]`` (e.g. ``0=3g.71gb,1g.18gb,1g.18gb``).

Each profile is one GPU instance, ``<slices>g.<GB>gb`` as `nvidia-smi mig -lgip` names them, at most 7 slices per
GPU, as an H200 has. Instance ids follow the placement NVML gives on a 7-slice GPU (a 7-slice instance is 0, 4-slice
1, 3-slice 1-2, 2-slice 3-5, 1-slice 7-13), first free first. An instance's readings are its GPU's: the memory
used shared out by slices (capped at its own size), the profiling ratios its GPU's, each instance a little apart.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterable, Mapping

from gpudash.errors import UsageError
from gpudash.exporter.source import MIG_KEYS, MigInstance

SLICES = 7
_PROFILE = re.compile(r"^([1-7])g\.([0-9]{1,3})gb$")
_PLACEMENT = {7: (0,), 4: (1,), 3: (1, 2), 2: (3, 4, 5), 1: tuple(range(7, 14))}
_RATIOS = frozenset(MIG_KEYS) - {"fb_used", "fb_free", "fb_total"}


def parse_mig(specs: Iterable[str]) -> dict[int, tuple[str, ...]]:
    """``0=3g.71gb,1g.18gb`` -> {0: ("3g.71gb", "1g.18gb")}; a bad spec raises UsageError naming the flag."""
    layout: dict[int, tuple[str, ...]] = {}
    for spec in specs:
        index, _, profiles = spec.partition("=")
        names = tuple(p.strip() for p in profiles.split(",") if p.strip())
        bad = [p for p in names if not _PROFILE.match(p)]
        if not index.strip().isdigit() or not names or bad:
            raise UsageError(f"--sim-mig {spec!r}: expected IDX=PROFILE[,PROFILE...], each PROFILE "
                             f"<slices>g.<GB>gb with 1-7 slices (e.g. 0=3g.71gb,1g.18gb)")
        slices = sum(_slices(p) for p in names)
        if slices > SLICES:
            raise UsageError(f"--sim-mig {spec!r}: {slices} slices; a GPU has {SLICES}")
        layout[int(index)] = names
    return layout


def _slices(profile: str) -> int:
    return int(profile.split("g.", 1)[0])


def _placed(profiles: tuple[str, ...]) -> list[int | None]:
    """Each profile's GPU instance id, first free first (None: no id left for it)."""
    taken: set[int] = set()
    ids: list[int | None] = []
    for profile in profiles:
        free = [i for i in _PLACEMENT.get(_slices(profile), ()) if i not in taken]
        ids.append(free[0] if free else None)
        taken.update(free[:1])
    return ids


def instances(gpu_uuid: str, profiles: tuple[str, ...], values: Mapping[str, float],
              keys: frozenset[str]) -> tuple[MigInstance, ...]:
    """The instances of one simulated GPU, from its reading `values`, with the `keys` asked for."""
    used = values.get("fb_used", 0.0)
    out = []
    for n, (profile, gi) in enumerate(zip(profiles, _placed(profiles), strict=True)):
        assert gi is not None  # within 7 slices every profile has an id left
        share = _slices(profile) / SLICES
        total = float(profile.split("g.", 1)[1].removesuffix("gb")) * 1024.0
        mine = min(total, round(used * share))
        own: dict[str, float] = {"fb_used": mine, "fb_free": total - mine, "fb_total": total}
        spread = 1.0 - 0.15 * (n % 3)  # instances a little apart, each the same at every read
        own.update((k, round(values[k] * spread, 4)) for k in _RATIOS if k in values)
        mig_uuid = f"MIG-{uuid.uuid5(uuid.NAMESPACE_OID, f'{gpu_uuid}/{gi}')}"
        out.append(MigInstance(gi, profile, mig_uuid, {k: v for k, v in own.items() if k in keys}))
    return tuple(sorted(out, key=lambda i: i.gpu_instance))
