"""thresholds.yaml and the site config (gpudash.yaml): read, validated, and held as typed immutable settings."""
