"""The routing benchmark: replay a trace or a synthetic workload through routers.

``trace`` reads Mooncake-format traces, ``workloads`` builds synthetic ones,
``capacity`` estimates what a fleet can serve, ``offline`` runs the router's dispatch
core against the simulator in virtual time, ``online`` and ``replay`` drive real
processes (engines, our router, peer routers) over HTTP and NATS, ``metrics`` and
``report`` turn results into tables, plots and goal checks, ``cli`` is
``eagle-eye bench routing``.
"""
