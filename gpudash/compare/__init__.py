"""What sync, review and preview share: a dashboard's canonical form, Grafana's rewrites undone, the readable diff."""
