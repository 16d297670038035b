"""PromQL: the query builders, the recording-rule registry and the expression scanner."""
