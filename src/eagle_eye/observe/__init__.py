"""Monitoring: the exporter, Prometheus rules, Grafana dashboards, the live dashboard."""
