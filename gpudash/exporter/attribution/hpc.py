"""Slurm / HPC job attribution: dcgm-exporter's job-mapping directory, read cheaply on every sweep.

A prolog writes one file per GPU into the directory (``--hpc-job-mapping-dir``, environment
``DCGM_HPC_JOB_MAPPING_DIR``); the epilog removes it. The contract is dcgm-exporter's
(shared/reference/job-attribution.md section 1):

- A file is named by the GPU's ``gpu`` label, ``<gpu>``, or ``<gpu>.<GPU_I_ID>`` for a MIG instance: the
  name must match ``^[0-9]+(\\.[0-9]+)?$`` and is compared as text, so ``07`` never matches GPU 7.
- Each line holds one job id. A GPU whose file holds N ids has N copies of its series, each with
  ``hpc_job="<id>"``; an empty file, or no file, leaves the series unchanged.

Where this reader deliberately differs from dcgm-exporter (each difference is safer and invisible to a
dashboard): blank lines and surrounding whitespace (a CR of a CRLF file included) are ignored, an id repeated
in one file counts once, what one file may contribute is capped and only a regular file with one name is read
(``mapping_file``: no symbolic link is followed, no FIFO waited on), a file that vanishes between the listing
and the read (an epilog racing the sweep) is simply absent, and nothing here ever fails a scrape (it runs on
the poller's sweep, not on the scrape path). Only names that can label a GPU of this node are read: ``<gpu>``
and at most ``MAX_INSTANCE_FILES`` ``<gpu>.<gi>`` per GPU; other visible names are ignored, hidden ones
(``.0.tmp``, ``.lock``, ``.sluid/``: what the prolog uses for itself) silently.

Warnings stay few and short, whatever is in the directory: the names ignored in one sweep make one line (a
count and a few examples); a file's problem is told once until the file changes, at most
``FILE_WARNINGS_PER_SWEEP`` files a sweep at warning level (the rest at debug level, then one line with their
count); a name or a line of content is quoted escaped and cut short (``escape.log_quote``).

A ``<gpu>.<gi>`` file labels the series of that MIG instance (``GPU_I_ID="<gi>"``; ``instance_copies``), one
copy per job as a GPU's file does; it never labels its parent GPU, whose series are keyed by ``<gpu>`` only.

Cheap re-reads: each sweep stats the directory and the files; the directory is listed again only when its
(mtime, inode) changed, and a file is parsed again only when its (mtime, size, inode) changed. A timestamp
within ``RACY_SECONDS`` of the moment it was read is not trusted (a change in the same clock tick would keep
it), so such a directory or file is read once more on the next sweep, as git treats a "racily clean" index.

Slurm 26.05 names a job's cgroup by its SLUID instead of ``job_<id>``: the prolog records
``<dir>/.sluid/<SLUID>`` holding the job id, and ``job_for_sluid`` reads it back for per-process attribution
(gpudash.exporter.attribution.procs).

Who holds each job: the prolog records ``<dir>/.jobinfo/<job id>`` (``user=``, ``account=``, ``partition=``,
``job_name=`` lines); ``job_info`` gives one label set per job some file of this node names, for
``gpudash_job_info``. A job without that file still gets its series, with empty values: so the series count
is bounded by the mapped jobs (at most ``MAX_JOBS_PER_GPU`` per GPU) and ends with the job.
"""

from __future__ import annotations

import logging
import os
import re
import stat
import time
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from gpudash.catalog import HPC_JOB_LABEL, JOB_INFO_LABELS
from gpudash.escape import log_quote
from gpudash.exporter.attribution import Labels
from gpudash.exporter.attribution.mapping_file import (
    NotAMappingFile,
    parse_job_info,
    parse_mapping,
    read_capped,
    refusal,
)
from gpudash.exporter.source import GpuIdentity

log = logging.getLogger("gpudash.exporter")

# The names dcgm-exporter accepts (its validGPUFile), ASCII digits only.
GPU_FILE = re.compile(r"(?P<gpu>[0-9]+)(\.(?P<gi>[0-9]+))?", re.ASCII)
# Slurm's SLUIDs are short alphanumerics (e.g. s5K1KKYAYG5D00); anything else is never looked up.
SLUID = re.compile(r"[A-Za-z0-9]{1,64}", re.ASCII)
SLUID_DIR = ".sluid"
JOB_INFO_DIR = ".jobinfo"
MAX_INSTANCE_FILES = 8  # <gpu>.<gi> files read per GPU: a MIG GPU has at most 7 GPU instances
RACY_SECONDS = 2.0  # coarser than any file system's timestamp tick that a mapping directory sits on
NAME_EXAMPLES = 3  # ignored names quoted in the sweep's one line about them
FILE_WARNINGS_PER_SWEEP = 5  # files whose problem is logged at warning level in one sweep; the rest at debug


@dataclass(frozen=True)
class _Signature:
    """What changes when a file or directory is replaced or rewritten."""

    mtime_ns: int
    size: int
    inode: int

    @classmethod
    def of(cls, st: os.stat_result) -> _Signature:
        return cls(st.st_mtime_ns, st.st_size, st.st_ino)


@dataclass(frozen=True)
class _Parsed:
    signature: _Signature
    jobs: tuple[str, ...]
    trusted: bool  # False: read within RACY_SECONDS of its mtime, so read it again next sweep


@dataclass(frozen=True)
class _Listing:
    signature: _Signature
    trusted: bool
    gpus: frozenset[str]  # the GPU indexes the names were chosen for
    names: tuple[str, ...]


class HpcJobMapping:
    """The `Attributor` of a job-mapping directory: one copy of a GPU's series per job in its file."""

    def __init__(self, directory: Path, *, label: str = HPC_JOB_LABEL,
                 clock_ns: Callable[[], int] = time.time_ns,
                 read_bytes: Callable[[Path], bytes] | None = None) -> None:
        self.directory = directory
        self.label = label
        self._clock_ns = clock_ns
        self._read = read_bytes or read_capped
        self._state = "unknown"  # ok | missing | unreadable: logged when it changes
        self._listing: _Listing | None = None
        self._files: dict[str, _Parsed] = {}
        self._copies: dict[str, tuple[Labels, ...]] = {}
        self._info: dict[str, tuple[_Signature, Labels]] = {}  # job id -> its job-info file as last read
        self._ignored: set[str] = set()  # names ignored at the last listing: each is told about once
        self._warned_files: dict[str, _Signature] = {}  # the file's state its last warning was about
        self._notes: list[tuple[str, str]] = []  # (name, problem) found in this sweep, logged at its end
        self.parses = 0  # files parsed since start: the proof that an unchanged directory costs only stats
        log.info("HPC job mapping: reading %s on every sweep", directory)

    # -- the Attributor protocol -----------------------------------------------------------------

    def refresh(self, gpus: Sequence[GpuIdentity], now: float) -> None:
        names = self._names(frozenset(str(gpu.index) for gpu in gpus))
        if names is None:
            self._files, self._copies, self._info = {}, {}, {}  # replaced, not cleared: a render may read them
            self._warned_files, self._ignored = {}, set()  # told again once the directory is back
            return
        files: dict[str, _Parsed] = {}
        for name in names:
            parsed = self._file(name)
            if parsed is not None:
                files[name] = parsed
        self._files = files
        self._copies = {name: tuple(((self.label, job),) for job in parsed.jobs)
                        for name, parsed in files.items() if parsed.jobs}
        self._warned_files = {name: sig for name, sig in self._warned_files.items() if name in names}
        self._info = {job: self._job_info_file(job) for job in sorted({j for p in files.values() for j in p.jobs})}
        self._report_files()

    def gpu_copies(self, gpu: GpuIdentity) -> tuple[Labels, ...]:
        return self._copies.get(str(gpu.index), ())

    def process_labels(self, pid: int) -> Labels:
        return ()

    def instance_copies(self, gpu: GpuIdentity, gpu_instance: int) -> tuple[Labels, ...]:
        return self._copies.get(f"{gpu.index}.{gpu_instance}", ())

    def close(self) -> None:
        """Nothing is held open between sweeps."""

    # -- what else it knows ----------------------------------------------------------------------

    @property
    def jobs(self) -> Mapping[str, tuple[str, ...]]:
        """Job ids by file name (``<gpu>`` and ``<gpu>.<gi>``), as of the last refresh; empty files left out."""
        return {name: parsed.jobs for name, parsed in self._files.items() if parsed.jobs}

    def job_info(self) -> tuple[Labels, ...]:
        """Per job some file of this node names: its job label, then user, account, partition and job name."""
        return tuple(((self.label, job), *info) for job, (_, info) in sorted(self._info.items()))

    def instance_jobs(self, gpu: int, gpu_instance: int) -> tuple[str, ...]:
        """The jobs of one MIG instance's file (``<gpu>.<gi>``)."""
        parsed = self._files.get(f"{gpu}.{gpu_instance}")
        return parsed.jobs if parsed else ()

    def job_for_sluid(self, sluid: str) -> str | None:
        """The job id the prolog recorded for a Slurm 26.05 SLUID, or None (unknown or unreadable)."""
        if not SLUID.fullmatch(sluid):
            return None
        try:
            jobs = parse_mapping(self._read(self.directory / SLUID_DIR / sluid)).jobs
        except OSError:
            return None
        return jobs[0] if len(jobs) == 1 else None

    def _job_info_file(self, job: str) -> tuple[_Signature, Labels]:
        """The job's job-info file, parsed again only when it changed; empty values when absent or unusable."""
        path = self.directory / JOB_INFO_DIR / job
        empty = (_Signature(-1, -1, -1), tuple((name, "") for name in JOB_INFO_LABELS))
        if job.startswith(".") or "/" in job:
            return empty
        try:
            st = os.lstat(path)
            signature = _Signature.of(st)
            cached = self._info.get(job)
            if cached is not None and cached[0] == signature and _settled(signature.mtime_ns, self._clock_ns()):
                return cached
            if refusal(st):
                return empty
            return signature, parse_job_info(self._read(path), JOB_INFO_LABELS)
        except OSError:
            return empty

    # -- reading -----------------------------------------------------------------------------------

    def _names(self, gpus: frozenset[str]) -> tuple[str, ...] | None:
        """The mapping files' names, listed again only when the directory changed; None when unusable."""
        try:
            st = os.stat(self.directory)
            if not stat.S_ISDIR(st.st_mode):
                raise NotADirectoryError(f"{self.directory} is not a directory")
            signature = _Signature(st.st_mtime_ns, 0, st.st_ino)
            listing = self._listing
            if listing is not None and listing.trusted and listing.signature == signature and listing.gpus == gpus:
                self._became("ok")
                return listing.names
            listed_at = self._clock_ns()
            with os.scandir(self.directory) as entries:
                names = self._accepted((entry.name for entry in entries), gpus)
        except FileNotFoundError:
            self._listing = None
            self._became("missing")
            return None
        except OSError as exc:
            self._listing = None
            self._became("unreadable", exc)
            return None
        self._listing = _Listing(signature, _settled(st.st_mtime_ns, listed_at), gpus, names)
        self._became("ok")
        return names

    def _accepted(self, listed: Iterable[str], gpus: frozenset[str]) -> tuple[str, ...]:
        """The names that can label a GPU of this node; the others told about in one line, each name once."""
        accepted: list[str] = []
        instances: dict[str, list[tuple[int, str]]] = {}
        ignored: dict[str, str] = {}  # name -> why
        for name in listed:
            if name.startswith("."):
                continue
            match = GPU_FILE.fullmatch(name)
            if match is None:
                ignored[name] = "not a GPU index (<gpu> or <gpu>.<gpu instance>)"
            elif match["gpu"] not in gpus:
                ignored[name] = "no GPU of this node has that index"
            elif match["gi"] is None:
                accepted.append(name)
            else:
                instances.setdefault(match["gpu"], []).append((int(match["gi"]), name))
        for found in instances.values():
            found.sort()
            accepted += [name for _, name in found[:MAX_INSTANCE_FILES]]
            ignored.update((name, f"over {MAX_INSTANCE_FILES} MIG instance files for one GPU")
                           for _, name in found[MAX_INSTANCE_FILES:])
        new = sorted(name for name in ignored if name not in self._ignored)
        self._ignored = set(ignored)
        if new:
            reasons = Counter(ignored[name] for name in new)
            log.warning("HPC job mapping: %s: %s ignored: %s (e.g. %s)", self.directory,
                        f"{len(new):,} name{'s' if len(new) > 1 else ''}",
                        "; ".join(f"{count:,} {why}" for why, count in reasons.most_common()),
                        ", ".join(log_quote(name, 40) for name in new[:NAME_EXAMPLES]))
        return tuple(sorted(accepted))

    def _file(self, name: str) -> _Parsed | None:
        path = self.directory / name
        cached = self._files.get(name)
        try:
            st = os.lstat(path)
            signature = _Signature.of(st)
            why = refusal(st)
            if why:
                self._warn_file(name, signature, f"{why}; ignored")
                return None
            if cached is not None and cached.trusted and cached.signature == signature:
                return cached
            read_at = self._clock_ns()
            data = self._read(path)
        except FileNotFoundError:  # removed by an epilog between the listing and now: no job there
            return None
        except NotAMappingFile as exc:  # replaced between the lstat and the open
            self._warn_file(name, None, f"{str(exc).removeprefix(str(path)).strip()}; ignored")
            return None
        except OSError as exc:
            self._warn_file(name, None, f"cannot be read ({exc.strerror or exc}); its GPU goes out unlabelled")
            return None
        self.parses += 1
        parsed = parse_mapping(data)
        if parsed.problems:
            self._warn_file(name, signature, "; ".join(parsed.problems))
        else:
            self._warned_files.pop(name, None)
        return _Parsed(signature, parsed.jobs, _settled(st.st_mtime_ns, read_at))

    def _warn_file(self, name: str, signature: _Signature | None, what: str) -> None:
        """Note a file's problem for this sweep's report, unless it was told about and the file is unchanged."""
        key = signature or _Signature(-1, -1, -1)
        if self._warned_files.get(name) != key:
            self._warned_files[name] = key
            self._notes.append((name, what))

    def _report_files(self) -> None:
        notes, self._notes = self._notes, []
        for number, (name, what) in enumerate(notes):
            level = logging.WARNING if number < FILE_WARNINGS_PER_SWEEP else logging.DEBUG
            log.log(level, "HPC job mapping: %s: %s", self.directory / name, what)
        if len(notes) > FILE_WARNINGS_PER_SWEEP:
            log.warning("HPC job mapping: %s: %d more files with problems (--log-level debug lists them)",
                        self.directory, len(notes) - FILE_WARNINGS_PER_SWEEP)

    def _became(self, state: str, exc: OSError | None = None) -> None:
        if state == self._state:
            return
        before, self._state = self._state, state
        if state == "missing":
            log.warning("HPC job mapping: %s does not exist; series go out without %s until it does",
                        self.directory, self.label)
        elif state == "unreadable":
            log.warning("HPC job mapping: %s cannot be read (%s); series go out without %s until it can",
                        self.directory, exc.strerror if exc is not None and exc.strerror else exc, self.label)
        elif before != "unknown":
            log.warning("HPC job mapping: %s is readable again", self.directory)


def _settled(mtime_ns: int, read_at_ns: int) -> bool:
    return read_at_ns - mtime_ns > RACY_SECONDS * 1e9
