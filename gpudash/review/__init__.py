"""Reviewing dashboard changes in git: the panel-level summary between revisions, and a git diff driver."""
