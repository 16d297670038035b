"""What sync and review share: a dashboard's canonical form, Grafana's rewrites undone, the readable diff."""
