"""PromQL: the query builder (query.py), bound to a site by for_settings.py; the recording rules
(recordings.py); the one expression scanner (scanner.py)."""
