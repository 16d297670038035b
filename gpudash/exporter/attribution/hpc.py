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
in one file counts once, a line that is not printable UTF-8 or is longer than ``MAX_JOB_ID`` characters is
skipped with a warning, a file over ``MAX_FILE_BYTES`` is ignored with a warning, a file that vanishes between
the listing and the read (an epilog racing the sweep) is simply absent, and nothing here ever fails a scrape
(it runs on the poller's sweep, not on the scrape path). Other names are ignored: a visible one with one
warning, a hidden one (``.0.tmp``, ``.lock``, ``.sluid/``: what the prolog uses for itself) silently;
directories are ignored.

``<gpu>.<gi>`` files are parsed and kept (``instance_jobs``) but label nothing today: this exporter
publishes no MIG-instance series, and dcgm-exporter keys a whole GPU's series by ``<gpu>`` only, so a MIG
file never labels its parent GPU.

Cheap re-reads: each sweep stats the directory and the files; the directory is listed again only when its
(mtime, inode) changed, and a file is parsed again only when its (mtime, size, inode) changed. A timestamp
within ``RACY_SECONDS`` of the moment it was read is not trusted (a change in the same clock tick would keep
it), so such a directory or file is read once more on the next sweep, as git treats a "racily clean" index.

Slurm 26.05 names a job's cgroup by its SLUID instead of ``job_<id>``: the prolog records
``<dir>/.sluid/<SLUID>`` holding the job id, and ``job_for_sluid`` reads it back for per-process attribution
(gpudash.exporter.attribution.procs).
"""

from __future__ import annotations

import logging
import os
import re
import stat
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from gpudash.catalog import HPC_JOB_LABEL
from gpudash.exporter.attribution import Labels
from gpudash.exporter.source import GpuIdentity

log = logging.getLogger("gpudash.exporter")

# The names dcgm-exporter accepts (its validGPUFile), ASCII digits only.
GPU_FILE = re.compile(r"[0-9]+(\.[0-9]+)?", re.ASCII)
# Slurm's SLUIDs are short alphanumerics (e.g. s5K1KKYAYG5D00); anything else is never looked up.
SLUID = re.compile(r"[A-Za-z0-9]{1,64}", re.ASCII)
SLUID_DIR = ".sluid"
MAX_FILE_BYTES = 64 * 1024  # dcgm-exporter's bufio.Scanner fails the scrape past 64 KiB; here the file is ignored
MAX_JOB_ID = 256
RACY_SECONDS = 2.0  # coarser than any file system's timestamp tick that a mapping directory sits on


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
class ParsedFile:
    """The job ids of one mapping file, in file order, each once, and what was wrong with its lines."""

    jobs: tuple[str, ...]
    problems: tuple[str, ...] = ()


def parse_mapping(data: bytes) -> ParsedFile:
    """One job id per line; blank lines, surrounding whitespace and repeats dropped; bad lines named."""
    if len(data) > MAX_FILE_BYTES:
        return ParsedFile((), (f"larger than {MAX_FILE_BYTES} bytes, ignored",))
    jobs: dict[str, None] = {}
    problems: list[str] = []
    for number, raw in enumerate(data.split(b"\n"), 1):
        try:
            line = raw.decode("utf-8").strip()
        except UnicodeDecodeError:
            problems.append(f"line {number} is not UTF-8 text, skipped")
            continue
        if not line:
            continue
        if len(line) > MAX_JOB_ID:
            problems.append(f"line {number} is longer than {MAX_JOB_ID} characters, skipped")
        elif not line.isprintable():
            problems.append(f"line {number} holds control characters, skipped")
        else:
            jobs.setdefault(line, None)
    return ParsedFile(tuple(jobs), tuple(problems))


class HpcJobMapping:
    """The `Attributor` of a job-mapping directory: one copy of a GPU's series per job in its file."""

    def __init__(self, directory: Path, *, label: str = HPC_JOB_LABEL,
                 clock_ns: Callable[[], int] = time.time_ns,
                 read_bytes: Callable[[Path], bytes] | None = None) -> None:
        self.directory = directory
        self.label = label
        self._clock_ns = clock_ns
        self._read = read_bytes or _read_capped
        self._state = "unknown"  # ok | missing | unreadable: logged when it changes
        self._listing: tuple[_Signature, bool, tuple[str, ...]] | None = None  # dir signature, trusted, names
        self._files: dict[str, _Parsed] = {}
        self._copies: dict[str, tuple[Labels, ...]] = {}
        self._warned_names: set[str] = set()
        self._warned_files: dict[str, _Signature] = {}
        self.parses = 0  # files parsed since start: the proof that an unchanged directory costs only stats
        log.info("HPC job mapping: reading %s on every sweep", directory)

    # -- the Attributor protocol -----------------------------------------------------------------

    def refresh(self, gpus: Sequence[GpuIdentity], now: float) -> None:
        names = self._names()
        if names is None:
            self._files, self._copies = {}, {}  # replaced, not cleared: a render may be reading them
            return
        files: dict[str, _Parsed] = {}
        for name in names:
            parsed = self._file(name)
            if parsed is not None:
                files[name] = parsed
        self._files = files
        self._copies = {name: tuple(((self.label, job),) for job in parsed.jobs)
                        for name, parsed in files.items() if parsed.jobs}

    def gpu_copies(self, gpu: GpuIdentity) -> tuple[Labels, ...]:
        return self._copies.get(str(gpu.index), ())

    def process_labels(self, pid: int) -> Labels:
        return ()

    def close(self) -> None:
        """Nothing is held open between sweeps."""

    # -- what else it knows ----------------------------------------------------------------------

    @property
    def jobs(self) -> Mapping[str, tuple[str, ...]]:
        """Job ids by file name (``<gpu>`` and ``<gpu>.<gi>``), as of the last refresh; empty files left out."""
        return {name: parsed.jobs for name, parsed in self._files.items() if parsed.jobs}

    def instance_jobs(self, gpu: int, gpu_instance: int) -> tuple[str, ...]:
        """The jobs of one MIG instance's file; no series of this exporter reads it (it publishes none)."""
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

    # -- reading -----------------------------------------------------------------------------------

    def _names(self) -> tuple[str, ...] | None:
        """The mapping files' names, listed again only when the directory changed; None when unusable."""
        try:
            st = os.stat(self.directory)
            if not stat.S_ISDIR(st.st_mode):
                raise NotADirectoryError(f"{self.directory} is not a directory")
            signature = _Signature(st.st_mtime_ns, 0, st.st_ino)
            if self._listing is not None and self._listing[1] and self._listing[0] == signature:
                self._became("ok")
                return self._listing[2]
            listed_at = self._clock_ns()
            with os.scandir(self.directory) as listing:
                names = tuple(self._accepted(listing))
        except FileNotFoundError:
            self._listing = None
            self._became("missing")
            return None
        except OSError as exc:
            self._listing = None
            self._became("unreadable", exc)
            return None
        self._listing = (signature, _settled(st.st_mtime_ns, listed_at), names)
        self._became("ok")
        return names

    def _accepted(self, entries: Iterator[os.DirEntry[str]]) -> Iterator[str]:
        seen: set[str] = set()
        for entry in entries:
            if GPU_FILE.fullmatch(entry.name):
                try:
                    if entry.is_dir():
                        continue
                except OSError:
                    continue
                yield entry.name
            elif not entry.name.startswith("."):
                seen.add(entry.name)
                if entry.name not in self._warned_names:
                    log.warning("HPC job mapping: %s: the name is not a GPU index (<gpu> or <gpu>.<gpu "
                                "instance>); ignored", self.directory / entry.name)
        self._warned_names = seen  # a name is warned about once, until it goes away

    def _file(self, name: str) -> _Parsed | None:
        path = self.directory / name
        cached = self._files.get(name)
        try:
            st = os.stat(path)
            if stat.S_ISDIR(st.st_mode):
                return None
            signature = _Signature.of(st)
            if cached is not None and cached.trusted and cached.signature == signature:
                return cached
            read_at = self._clock_ns()
            data = self._read(path)
        except FileNotFoundError:  # removed by an epilog between the listing and now: no job there
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
        key = signature or _Signature(-1, -1, -1)
        if self._warned_files.get(name) != key:
            self._warned_files[name] = key
            log.warning("HPC job mapping: %s: %s", self.directory / name, what)

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


def _read_capped(path: Path) -> bytes:
    """At most MAX_FILE_BYTES + 1 bytes (enough to tell an overlong file); a FIFO or device is refused."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(f"{path} is not a regular file")
        with os.fdopen(fd, "rb", closefd=False) as f:
            return f.read(MAX_FILE_BYTES + 1)
    finally:
        os.close(fd)
