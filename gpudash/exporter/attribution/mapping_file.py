"""One job-mapping file: opened without following links, read up to a cap, parsed into at most a few job ids.

The exporter may run as root (the kubelet's socket needs it) and serves what it reads on /metrics, so a
mapping file is read only when it is a regular file with one name: a symbolic link (``ln -s /etc/shadow 0``), a
second hard link to another file, a FIFO (which would block the sweep), a device, a socket or a directory is
refused before it is opened, and again after (``O_NOFOLLOW``, ``O_NONBLOCK`` and ``fstat``), so a swap in
between changes nothing.

What one file may contribute is capped, since each job id is one more copy of every series of its GPU (a
copy is ~36 KB of /metrics for an H200 with its NVLink links): at most ``MAX_FILE_BYTES`` are read (a longer
file is ignored), at most ``MAX_JOBS_PER_GPU`` distinct ids are kept (the first ones, in file order), and an
id longer than ``MAX_JOB_ID`` characters is skipped. A problem is described in one line, with at most
``QUOTE_CHARS`` characters of the file's content per example, escaped (``log_quote``).
"""

from __future__ import annotations

import os
import stat
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from gpudash.escape import log_quote

MAX_FILE_BYTES = 64 * 1024  # dcgm-exporter's bufio.Scanner fails the scrape past 64 KiB; here the file is ignored
MAX_JOBS_PER_GPU = 16  # copies of a GPU's series one file may ask for: 8 H200s x 16 jobs, 4.6-6.8 MB of /metrics
MAX_JOB_ID = 128  # characters of one hpc_job value (Slurm's ids, 48213_7 or 48213+1, are far shorter)
QUOTE_CHARS = 30  # of a bad line, quoted in the warning (three kinds of problem: under 100 characters in all)
_OPEN_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC

_KINDS = (
    (stat.S_ISLNK, "a symbolic link (not followed)"),
    (stat.S_ISDIR, "a directory"),
    (stat.S_ISFIFO, "a FIFO"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
)


class NotAMappingFile(OSError):
    """The path is not a regular file with one name; the message says what it is."""


def refusal(st: os.stat_result) -> str | None:
    """Why a file with this (l)stat is not read as a mapping file, or None when it may be."""
    for test, kind in _KINDS:
        if test(st.st_mode):
            return f"is {kind}, not a regular file"
    if not stat.S_ISREG(st.st_mode):
        return "is not a regular file"
    if st.st_nlink > 1:
        return f"has {st.st_nlink} hard links: a mapping file has one (another name could be any file)"
    return None


def read_capped(path: Path) -> bytes:
    """At most MAX_FILE_BYTES + 1 bytes (enough to tell an overlong file); raises NotAMappingFile for anything
    but a regular file with one name, without following a link or waiting on a FIFO."""
    try:
        fd = os.open(path, _OPEN_FLAGS)
    except OSError as exc:
        if os.path.islink(path):  # ELOOP, or EMLINK on some systems: a link put there since it was listed
            raise NotAMappingFile(f"{path} {refusal(os.lstat(path))}") from None
        raise exc
    try:
        why = refusal(os.fstat(fd))
        if why:
            raise NotAMappingFile(f"{path} {why}")
        with os.fdopen(fd, "rb", closefd=False) as f:
            return f.read(MAX_FILE_BYTES + 1)
    finally:
        os.close(fd)


@dataclass(frozen=True)
class ParsedFile:
    """The job ids of one mapping file, in file order, each once, and what was wrong with it (one text each)."""

    jobs: tuple[str, ...]
    problems: tuple[str, ...] = ()


_BAD_LINE: tuple[tuple[str, Callable[[str], bool]], ...] = (
    (f"longer than {MAX_JOB_ID} characters", lambda line: len(line) > MAX_JOB_ID),
    ("holding control characters", lambda line: not line.isprintable()),
)


def parse_mapping(data: bytes) -> ParsedFile:
    """One job id per line; blank lines, surrounding whitespace and repeats dropped; bad lines counted."""
    if len(data) > MAX_FILE_BYTES:
        return ParsedFile((), (f"larger than {MAX_FILE_BYTES} bytes, ignored",))
    jobs: dict[str, None] = {}
    bad: dict[str, tuple[int, int, str]] = {}  # kind -> (count, first line number, its content quoted)
    capped = False
    for number, raw in enumerate(data.split(b"\n"), 1):
        try:
            line = raw.decode("utf-8").strip()
        except UnicodeDecodeError:
            kind, shown = "not UTF-8 text", log_quote(raw.strip(), QUOTE_CHARS)
        else:
            if not line:
                continue
            kind = next((name for name, test in _BAD_LINE if test(line)), "")
            shown = log_quote(line, QUOTE_CHARS)
            if not kind:
                if line not in jobs and len(jobs) == MAX_JOBS_PER_GPU:
                    capped = True
                    break  # the rest of the file is not read: nothing more of it would be used
                jobs.setdefault(line, None)
                continue
        count, first, example = bad.get(kind, (0, number, shown))
        bad[kind] = (count + 1, first, example)
    problems = [f"{count} line{'s' if count > 1 else ''} {kind}, skipped (line {first}: {example})"
                for kind, (count, first, example) in bad.items()]
    if capped:
        problems.append(f"more than {MAX_JOBS_PER_GPU} job ids: only the first {MAX_JOBS_PER_GPU} are used")
    return ParsedFile(tuple(jobs), tuple(problems))


MAX_INFO_CHARS = 128  # of one job-info value (a job name is free text); longer values are cut


def parse_job_info(data: bytes, names: tuple[str, ...]) -> tuple[tuple[str, str], ...]:
    """The Prolog's `key=value` lines of a job-info file: each of `names` once, in that order, its value one
    line of printable text cut to MAX_INFO_CHARS (empty when absent); anything else in the file is ignored."""
    found: dict[str, str] = {}
    if len(data) <= MAX_FILE_BYTES:
        for raw in data.decode("utf-8", "replace").splitlines():
            key, sep, value = raw.partition("=")
            if sep and key in names and key not in found:
                found[key] = "".join(c if c.isprintable() else " " for c in value.strip())[:MAX_INFO_CHARS]
    return tuple((name, found.get(name, "")) for name in names)
