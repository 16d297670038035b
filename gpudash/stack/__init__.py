"""The local stack: managed Prometheus and Alertmanager processes, loopback servers, history, the demo."""
