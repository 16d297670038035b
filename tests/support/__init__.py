"""Helpers the tests share: repository paths, waiting on a condition, running `gpudash` in-process."""
