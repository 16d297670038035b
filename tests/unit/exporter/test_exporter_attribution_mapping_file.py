"""One job-mapping file: read only when it is a regular file with one name, and what it may contribute capped."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from gpudash.exporter.attribution.mapping_file import (
    MAX_FILE_BYTES,
    MAX_JOB_ID,
    MAX_JOBS_PER_GPU,
    NotAMappingFile,
    parse_mapping,
    read_capped,
)


def test_a_regular_file_is_read_up_to_one_byte_past_the_cap(tmp_path: Path) -> None:
    (tmp_path / "0").write_bytes(b"7" * (MAX_FILE_BYTES * 2))
    assert len(read_capped(tmp_path / "0")) == MAX_FILE_BYTES + 1


def test_a_link_put_in_place_after_the_listing_is_still_not_followed(tmp_path: Path) -> None:
    (tmp_path / "shadow").write_text("root:$6$salt$hash:19000:0:99999:7:::\n")
    (tmp_path / "0").symlink_to(tmp_path / "shadow")
    with pytest.raises(NotAMappingFile, match="is a symbolic link"):
        read_capped(tmp_path / "0")


def test_a_second_name_of_another_file_is_refused(tmp_path: Path) -> None:
    (tmp_path / "shadow").write_text("secret\n")
    os.link(tmp_path / "shadow", tmp_path / "0")
    with pytest.raises(NotAMappingFile, match="has 2 hard links"):
        read_capped(tmp_path / "0")


def test_a_fifo_is_refused_without_waiting_for_a_writer(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "0")
    with pytest.raises(NotAMappingFile, match="is a FIFO"):
        read_capped(tmp_path / "0")  # a blocking open would wait here forever


def test_a_directory_is_refused(tmp_path: Path) -> None:
    (tmp_path / "0").mkdir()
    with pytest.raises(NotAMappingFile, match="is a directory"):
        read_capped(tmp_path / "0")


def test_the_first_ids_up_to_the_cap_are_kept_in_file_order() -> None:
    ids = [f"{1000 - i}" for i in range(MAX_JOBS_PER_GPU + 5)]
    parsed = parse_mapping(("\n".join(ids[:3] + ids) + "\n").encode())  # repeats count once, and not against the cap
    assert parsed.jobs == tuple(ids[:MAX_JOBS_PER_GPU])
    assert parsed.problems == (f"more than {MAX_JOBS_PER_GPU} job ids: only the first {MAX_JOBS_PER_GPU} are used",)
    exactly = parse_mapping("\n".join(ids[:MAX_JOBS_PER_GPU]).encode())
    assert exactly.jobs == tuple(ids[:MAX_JOBS_PER_GPU]) and exactly.problems == ()


def test_an_id_is_at_most_the_label_value_cap() -> None:
    parsed = parse_mapping(b"a" * MAX_JOB_ID + b"\n" + b"b" * (MAX_JOB_ID + 1) + b"\n")
    assert parsed.jobs == ("a" * MAX_JOB_ID,)
    assert parsed.problems == (f"1 line longer than {MAX_JOB_ID} characters, skipped (line 2: '{'b' * 25}'...)",)


def test_problems_are_counted_by_kind_and_quote_little_of_the_content_escaped() -> None:
    data = b"\xff\xfe\x1b]0;pwned\x07" * 500 + b"\n48213\n\x1b[31mred\x1b[0m\n" + b"\xc3\x28\n" * 300
    parsed = parse_mapping(data)
    assert parsed.jobs == ("48213",)
    assert parsed.problems == ("301 lines not UTF-8 text, skipped (line 1: b'\\xff\\xfe\\x1b]0;pwned\\x07'...)",
                               "1 line holding control characters, skipped (line 3: '\\x1b[31mred\\x1b[0m')")
    assert sum(len(problem) for problem in parsed.problems) < 200
