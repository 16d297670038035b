"""Backtest: what a thresholds.yaml would have paged, evaluated over a Prometheus's stored history.

Prometheus evaluates alerting rules only as time passes; this replays them over the past. `rules` takes the
alerting rules `gpudash rules` renders and inlines the recording rules they read (history need not hold
recorded series); `engine` evaluates each expression with range queries at the rule interval, chunked, and
feeds the answers to `state`, the `for:` / `keep_firing_for` state machine of Prometheus's rules manager;
`notify` estimates what the generated Alertmanager routes would have sent; `summary` counts and `report`
prints; `tune` proposes thresholds from the fleet's own history and `yamledit` writes them into
thresholds.yaml without losing a comment.
"""
