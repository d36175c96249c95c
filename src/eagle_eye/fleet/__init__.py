"""The fleet as every consumer sees it: one view fed by NATS.

``view`` holds the newest snapshot of every engine rank and the routing targets built
from them, ``target`` one target and its accounting, ``subscriber`` the NATS edge that
keeps a view current (with sync-on-connect), ``stats`` the router's cumulative latency
statistics that dashboards read. The router and every observer (exporter, dashboard,
``top``) sit on top of this layer and never import each other.
"""
