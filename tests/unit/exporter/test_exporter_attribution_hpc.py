"""The HPC job-mapping directory, rule by rule, on a temporary directory (dcgm-exporter's contract plus ours)."""

from __future__ import annotations

import logging
import os
import time
from pathlib import Path

import pytest

from gpudash.exporter.attribution.hpc import MAX_INSTANCE_FILES, HpcJobMapping
from gpudash.exporter.attribution.mapping_file import MAX_FILE_BYTES, MAX_JOB_ID, MAX_JOBS_PER_GPU, parse_mapping
from gpudash.exporter.collectors import all_signals
from gpudash.exporter.poller import Poller
from gpudash.exporter.sim.fleet import fleet_from_specs
from gpudash.exporter.sim.simulated import SimulatedSource
from gpudash.exporter.source import GpuIdentity

GPUS = [GpuIdentity(i, f"GPU-{i:08d}", f"00000000:{i + 10:02X}:00.0", "NVIDIA H200", i) for i in range(8)]
LATER = 60 * 10**9  # a clock a minute ahead: every file counts as settled (not racily written)


def _mapping(directory: Path, **kwargs: object) -> HpcJobMapping:
    kwargs.setdefault("clock_ns", lambda: time.time_ns() + LATER)
    return HpcJobMapping(directory, **kwargs)  # type: ignore[arg-type]


def _jobs(mapping: HpcJobMapping, index: int) -> list[str]:
    return [dict(labels)["hpc_job"] for labels in mapping.gpu_copies(GPUS[index])]


def _refreshed(directory: Path, **kwargs: object) -> HpcJobMapping:
    mapping = _mapping(directory, **kwargs)
    mapping.refresh(GPUS, 0.0)
    return mapping


def test_one_copy_per_job_line_and_the_label_is_hpc_job(tmp_path: Path) -> None:
    (tmp_path / "0").write_text("41\n42\n")
    (tmp_path / "3").write_text("7")  # no trailing newline, as the Slinky scripts write it
    mapping = _refreshed(tmp_path)
    assert mapping.gpu_copies(GPUS[0]) == ((("hpc_job", "41"),), (("hpc_job", "42"),))
    assert _jobs(mapping, 3) == ["7"]


def test_no_file_and_an_empty_file_leave_the_series_unchanged(tmp_path: Path) -> None:
    (tmp_path / "1").write_text("")
    (tmp_path / "2").write_text("\n \n\r\n")
    mapping = _refreshed(tmp_path)
    assert [mapping.gpu_copies(g) for g in GPUS[:3]] == [(), (), ()]


def test_a_repeated_id_counts_once_and_blank_lines_whitespace_and_cr_are_ignored(tmp_path: Path) -> None:
    (tmp_path / "0").write_bytes(b"  41 \r\n\r\n41\n42\r\n41")
    assert _jobs(_refreshed(tmp_path), 0) == ["41", "42"]


def test_leading_zeros_never_match_and_names_are_ascii_digits_only(tmp_path: Path) -> None:
    for name in ("07", "٣", "+3", "1e5"):
        (tmp_path / name).write_text("99\n")
    mapping = _refreshed(tmp_path)
    assert all(mapping.gpu_copies(g) == () for g in GPUS)
    assert mapping.jobs == {} and mapping.parses == 0  # 07 is a valid name (dcgm-exporter's), of no GPU here


@pytest.mark.parametrize("name", ["foo", "bar.txt", "1.2.3", "-2", "NaN"])
def test_a_name_that_is_not_an_index_is_ignored_with_one_warning(
        tmp_path: Path, caplog: pytest.LogCaptureFixture, name: str) -> None:
    (tmp_path / name).write_text("99\n")
    (tmp_path / "0").write_text("1\n")
    mapping = _mapping(tmp_path, clock_ns=time.time_ns)  # racy: the directory is listed again each sweep
    with caplog.at_level(logging.WARNING, "gpudash.exporter"):
        for _ in range(3):
            mapping.refresh(GPUS, 0.0)
    warnings = [r.getMessage() for r in caplog.records if name in r.getMessage()]
    assert len(warnings) == 1 and "not a GPU index" in warnings[0]
    assert _jobs(mapping, 0) == ["1"]


def test_hidden_names_are_the_scripts_own_and_ignored_without_a_warning(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    (tmp_path / ".0.tmp").write_text("5\n")
    (tmp_path / ".lock").write_text("")
    (tmp_path / ".sluid").mkdir()
    with caplog.at_level(logging.WARNING, "gpudash.exporter"):
        mapping = _refreshed(tmp_path)
    assert mapping.jobs == {} and not caplog.records


def test_directories_are_ignored_even_with_an_index_name(tmp_path: Path) -> None:
    (tmp_path / "4").mkdir()
    (tmp_path / "4" / "0").write_text("9\n")
    assert _refreshed(tmp_path).jobs == {}


def test_mig_instance_files_are_parsed_but_label_no_gpu_series(tmp_path: Path) -> None:
    (tmp_path / "2.1").write_text("500\n")
    (tmp_path / "2.3").write_text("501\n502\n")
    mapping = _refreshed(tmp_path)
    assert mapping.gpu_copies(GPUS[2]) == ()
    assert mapping.instance_jobs(2, 3) == ("501", "502") and mapping.instance_jobs(2, 1) == ("500",)


def test_an_unchanged_directory_is_only_statted_nothing_parsed_again(tmp_path: Path) -> None:
    for i in range(8):
        (tmp_path / str(i)).write_text(f"{100 + i}\n")
    mapping = _mapping(tmp_path)
    mapping.refresh(GPUS, 0.0)
    assert mapping.parses == 8
    for _ in range(5):
        mapping.refresh(GPUS, 0.0)
    assert mapping.parses == 8
    (tmp_path / "3").write_text("200\n201\n")  # size changes: only this file is parsed again
    mapping.refresh(GPUS, 0.0)
    assert mapping.parses == 9 and _jobs(mapping, 3) == ["200", "201"]


def test_a_rewrite_of_the_same_size_is_seen_by_its_inode_or_mtime(tmp_path: Path) -> None:
    target = tmp_path / "5"
    target.write_text("111\n")
    os.utime(target, ns=(10**18, 10**18))
    mapping = _mapping(tmp_path)
    mapping.refresh(GPUS, 0.0)
    temp = tmp_path / ".5.tmp"
    temp.write_text("222\n")  # the prolog's way: a new inode renamed over the old name
    os.utime(temp, ns=(10**18, 10**18))  # even with the very same mtime
    temp.replace(target)
    mapping.refresh(GPUS, 0.0)
    assert _jobs(mapping, 5) == ["222"]
    target.write_text("333\n")  # in place: same inode, same size, a new mtime
    mapping.refresh(GPUS, 0.0)
    assert _jobs(mapping, 5) == ["333"]


def test_a_file_written_just_now_is_read_again_until_its_time_settles(tmp_path: Path) -> None:
    (tmp_path / "0").write_text("1\n")
    now = [time.time_ns()]
    mapping = _mapping(tmp_path, clock_ns=lambda: now[0])
    mapping.refresh(GPUS, 0.0)
    mapping.refresh(GPUS, 0.0)
    assert mapping.parses == 2  # a change within the same timestamp tick could otherwise go unseen
    now[0] += LATER
    mapping.refresh(GPUS, 0.0)
    mapping.refresh(GPUS, 0.0)
    assert mapping.parses == 3


def test_files_added_and_removed_are_seen_on_the_next_sweep(tmp_path: Path) -> None:
    mapping = _mapping(tmp_path)
    mapping.refresh(GPUS, 0.0)
    (tmp_path / "6").write_text("77\n")
    mapping.refresh(GPUS, 0.0)
    assert _jobs(mapping, 6) == ["77"]
    (tmp_path / "6").unlink()
    mapping.refresh(GPUS, 0.0)
    assert mapping.gpu_copies(GPUS[6]) == ()


def test_a_file_that_vanishes_between_listing_and_reading_is_simply_absent(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    (tmp_path / "0").write_text("1\n")
    (tmp_path / "1").write_text("2\n")

    def racing_epilog(path: Path) -> bytes:
        if path.name == "1":
            path.unlink()
        return path.read_bytes()

    with caplog.at_level(logging.WARNING, "gpudash.exporter"):
        mapping = _refreshed(tmp_path, read_bytes=racing_epilog)
    assert _jobs(mapping, 0) == ["1"] and mapping.gpu_copies(GPUS[1]) == ()
    assert not caplog.records


def test_a_missing_directory_logs_once_and_again_only_when_it_breaks_again(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    directory = tmp_path / "job-mapping"
    mapping = _mapping(directory)
    with caplog.at_level(logging.INFO, "gpudash.exporter"):
        caplog.clear()
        for _ in range(3):
            mapping.refresh(GPUS, 0.0)
        assert [r.getMessage() for r in caplog.records].count(
            f"HPC job mapping: {directory} does not exist; series go out without hpc_job until it does") == 1
        directory.mkdir()
        (directory / "2").write_text("9\n")
        caplog.clear()
        mapping.refresh(GPUS, 0.0)
        mapping.refresh(GPUS, 0.0)
        assert _jobs(mapping, 2) == ["9"]
        assert [r.getMessage() for r in caplog.records] == [f"HPC job mapping: {directory} is readable again"]
        (directory / "2").unlink()
        directory.rmdir()
        caplog.clear()
        mapping.refresh(GPUS, 0.0)
        mapping.refresh(GPUS, 0.0)
        assert mapping.gpu_copies(GPUS[2]) == ()
        assert len(caplog.records) == 1 and "does not exist" in caplog.records[0].getMessage()


def test_a_path_that_is_a_file_not_a_directory_is_unreadable_not_a_crash(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    (tmp_path / "map").write_text("0\n")
    with caplog.at_level(logging.WARNING, "gpudash.exporter"):
        mapping = _refreshed(tmp_path / "map")
    assert mapping.jobs == {} and "cannot be read" in caplog.text


def test_an_unreadable_directory_logs_once_labels_nothing_and_recovers(
        tmp_path: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "0").write_text("1\n")
    mapping = _mapping(tmp_path, clock_ns=time.time_ns)  # racy: listed again on every sweep
    mapping.refresh(GPUS, 0.0)
    assert _jobs(mapping, 0) == ["1"]

    def denied(path: object) -> None:
        raise PermissionError(13, "Permission denied", str(path))

    with caplog.at_level(logging.WARNING, "gpudash.exporter"):
        with monkeypatch.context() as patched:
            patched.setattr(os, "scandir", denied)  # root reads any directory whatever its mode
            for _ in range(3):
                mapping.refresh(GPUS, 0.0)
            assert mapping.gpu_copies(GPUS[0]) == ()
        mapping.refresh(GPUS, 0.0)
    assert _jobs(mapping, 0) == ["1"]
    assert [r.getMessage() for r in caplog.records] == [
        f"HPC job mapping: {tmp_path} cannot be read (Permission denied); series go out without hpc_job until it can",
        f"HPC job mapping: {tmp_path} is readable again"]


def test_an_overlong_file_is_ignored_with_a_warning_once(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    (tmp_path / "0").write_bytes(b"1\n" * (MAX_FILE_BYTES // 2 + 1))
    mapping = _mapping(tmp_path, clock_ns=time.time_ns)
    with caplog.at_level(logging.WARNING, "gpudash.exporter"):
        for _ in range(3):
            mapping.refresh(GPUS, 0.0)
    assert mapping.gpu_copies(GPUS[0]) == ()
    assert len([r for r in caplog.records if "larger than" in r.getMessage()]) == 1


def test_binary_garbage_lines_are_skipped_and_the_good_ids_kept(tmp_path: Path) -> None:
    (tmp_path / "0").write_bytes(b"\x00\x01\xff\xfe\n48213\n\x1b[31mred\n" + b"9" * 300 + b"\n")
    assert _jobs(_refreshed(tmp_path), 0) == ["48213"]


def test_a_fifo_is_refused_not_waited_on(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "0")
    (tmp_path / "1").write_text("5\n")
    mapping = _refreshed(tmp_path)
    assert mapping.gpu_copies(GPUS[0]) == () and _jobs(mapping, 1) == ["5"]


def test_quotes_and_backslashes_are_kept_as_text_for_the_render_to_escape() -> None:
    assert parse_mapping(b'a"b\\c\n').jobs == ('a"b\\c',)


def test_sluid_files_name_the_job_and_odd_names_are_never_looked_up(tmp_path: Path) -> None:
    (tmp_path / ".sluid").mkdir()
    (tmp_path / ".sluid" / "s5K1KKYAYG5D00").write_text("48213\n")
    mapping = _mapping(tmp_path)
    assert mapping.job_for_sluid("s5K1KKYAYG5D00") == "48213"
    assert mapping.job_for_sluid("sNOPE") is None
    assert mapping.job_for_sluid("../0") is None


def test_the_label_name_follows_the_constructor(tmp_path: Path) -> None:
    (tmp_path / "0").write_text("1\n")
    assert _refreshed(tmp_path, label="slurm_job").gpu_copies(GPUS[0]) == ((("slurm_job", "1"),),)


# -- a hostile directory: links, odd files, too many ids, too many names -------------------------------------

SHADOW = "root:$6$salt$hash:19000:0:99999:7:::\ndaemon:*:19000:0:99999:7:::\n"


def _warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]


def test_a_symbolic_link_is_never_followed_and_is_told_once(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    secret = tmp_path / "shadow"
    secret.write_text(SHADOW)
    directory = tmp_path / "job-mapping"
    directory.mkdir()
    (directory / "0").symlink_to(secret)  # ln -s /etc/shadow DIR/0, with the exporter running as root
    (directory / "1").symlink_to(directory / "missing")
    (directory / "2").write_text("48213\n")
    mapping = _mapping(directory, clock_ns=time.time_ns)  # racy: listed and statted again on every sweep
    with caplog.at_level(logging.WARNING, "gpudash.exporter"):
        for _ in range(3):
            mapping.refresh(GPUS, 0.0)
    assert mapping.jobs == {"2": ("48213",)}
    assert mapping.gpu_copies(GPUS[0]) == () and mapping.gpu_copies(GPUS[1]) == ()
    said = _warnings(caplog)
    assert sorted(said) == [f"HPC job mapping: {directory / name}: is a symbolic link (not followed), not a regular "
                            "file; ignored" for name in ("0", "1")]


def test_a_hard_link_a_fifo_a_device_and_a_directory_are_refused_each_told_once(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    secret = tmp_path / "shadow"
    secret.write_text(SHADOW)
    directory = tmp_path / "job-mapping"
    directory.mkdir()
    os.link(secret, directory / "0")  # a second name of a file outside the directory
    os.mkfifo(directory / "1")  # opened for reading, a FIFO would block the sweep until a writer comes
    (directory / "3").mkdir()
    if os.geteuid() == 0:
        os.mknod(directory / "2", 0o600 | 0o020000, os.makedev(1, 5))  # a character device (/dev/zero's numbers)
    (directory / "4").write_text("7\n")
    mapping = _mapping(directory, clock_ns=time.time_ns)
    with caplog.at_level(logging.WARNING, "gpudash.exporter"):
        for _ in range(3):
            mapping.refresh(GPUS, 0.0)
    assert mapping.jobs == {"4": ("7",)}
    said = "\n".join(_warnings(caplog))
    assert said.count("\n") + 1 == (4 if os.geteuid() == 0 else 3)
    assert f"{directory / '0'}: has 2 hard links" in said and f"{directory / '1'}: is a FIFO" in said
    assert f"{directory / '3'}: is a directory" in said
    assert os.geteuid() != 0 or f"{directory / '2'}: is a character device" in said


def test_a_file_of_thousands_of_ids_gives_at_most_the_cap_of_copies(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    ids = [str(100000 + i) for i in range(9285)]  # 65 KB: 334 MB of /metrics when each id was a copy
    (tmp_path / "0").write_text("\n".join(ids) + "\n")
    with caplog.at_level(logging.WARNING, "gpudash.exporter"):
        mapping = _refreshed(tmp_path)
    assert _jobs(mapping, 0) == ids[:MAX_JOBS_PER_GPU]
    assert _warnings(caplog) == [f"HPC job mapping: {tmp_path / '0'}: more than {MAX_JOBS_PER_GPU} job ids: only the "
                                 f"first {MAX_JOBS_PER_GPU} are used"]


def test_the_exposition_stays_bounded_whatever_the_files_hold(tmp_path: Path) -> None:
    for gpu in range(2):
        (tmp_path / str(gpu)).write_text("".join(f"{i:0{MAX_JOB_ID}d}\n" for i in range(MAX_FILE_BYTES // 200)))
    plain, mapped = (_poller(attributor) for attributor in (None, _mapping(tmp_path)))
    assert mapped.attributor is not None and len(mapped.attributor.gpu_copies(mapped.gpus[0])) == MAX_JOBS_PER_GPU
    body = mapped.exposition.body
    assert body.count(b'hpc_job="') > 0
    # each copy repeats the GPU's series once, with one label of at most MAX_JOB_ID characters more per line
    lines = plain.exposition.body.count(b"\n")
    assert len(body) <= MAX_JOBS_PER_GPU * (len(plain.exposition.body) + lines * (MAX_JOB_ID + 12))


def _poller(attributor: HpcJobMapping | None) -> Poller:
    source = SimulatedSource(fleet_from_specs(2, 3, workloads=[], faults=[], epoch=0.0))
    poller = Poller(source, all_signals().keys, hostname="n1", attributor=attributor)
    poller.sweep("fast", 600.0)
    return poller


def test_thousands_of_bad_names_make_one_short_line_and_no_repeat(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    for i in range(10_000):
        (tmp_path / f"job{i:05d}").touch()
    for name in ("8", "07", "0.1\x1b[2J"):  # no GPU 8 or 07 on this node; an escape sequence in a name
        (tmp_path / name).touch()
    mapping = _mapping(tmp_path, clock_ns=time.time_ns)  # racy: listed again on every sweep
    with caplog.at_level(logging.WARNING, "gpudash.exporter"):
        for _ in range(3):
            mapping.refresh(GPUS, 0.0)
        said = _warnings(caplog)
        assert len(said) == 1 and len(said[0]) < 400 and said[0].isprintable(), said[:3]
        assert said[0].startswith(f"HPC job mapping: {tmp_path}: 10,003 names ignored: 10,001 not a GPU index")
        assert "2 no GPU of this node has that index" in said[0] and "e.g. '0.1\\x1b[2J', '07', '8'" in said[0]
        (tmp_path / "job-new").touch()
        caplog.clear()
        mapping.refresh(GPUS, 0.0)
    assert _warnings(caplog) == [f"HPC job mapping: {tmp_path}: 1 name ignored: 1 not a GPU index (<gpu> or "
                                 "<gpu>.<gpu instance>) (e.g. 'job-new')"]


def test_many_files_with_problems_make_a_few_lines_then_a_count(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    garbage = bytes(range(256)) * 36  # 9 KB of binary: one line of its problems was once 9 KB long
    for name in [str(i) for i in range(8)] + [f"0.{gi}" for gi in range(1, 5)]:
        (tmp_path / name).write_bytes(garbage)
    with caplog.at_level(logging.WARNING, "gpudash.exporter"):
        mapping = _refreshed(tmp_path)
        mapping.refresh(GPUS, 0.0)
    said = _warnings(caplog)
    assert len(said) == 6 and said[-1] == f"HPC job mapping: {tmp_path}: 7 more files with problems (--log-level " \
                                          "debug lists them)"
    assert all(len(line) < 300 and line.isprintable() for line in said), said
    assert "36 lines not UTF-8 text, skipped (line 2: b'\\x0e\\x0f" in said[0]


def test_only_files_that_can_label_a_gpu_here_are_read(tmp_path: Path) -> None:
    for name in ["8", "99", "12345"] + [f"1.{gi}" for gi in range(20)]:
        (tmp_path / name).write_text("5\n")
    mapping = _refreshed(tmp_path)
    assert sorted(mapping.jobs) == sorted(f"1.{gi}" for gi in range(MAX_INSTANCE_FILES))
    assert mapping.parses == MAX_INSTANCE_FILES
