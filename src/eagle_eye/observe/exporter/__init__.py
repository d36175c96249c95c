"""``eagle-eye exporter``: NATS snapshots as Prometheus series.

``families`` is the pure part (a fleet view in, metric families out); ``cli`` is the
service around it (the fleet subscriber and the ``/metrics`` server) and its command.
"""
