"""The metrics agent: publish snapshots for engines that have no plugin hook.

``watcher`` scrapes one engine and offers samples to the shared publisher, ``runner``
runs one watcher per thread, ``config`` holds the engines and timing asked for,
``http`` is the stdlib keep-alive fetcher (the sidecar needs only the engine-side
install), ``promtext`` a targeted Prometheus text parser, ``engines/`` one data table
per engine kind (vLLM, SGLang, TGI, llama.cpp, Ray Serve), ``track`` the per-rank
bookkeeping, ``models`` model discovery, ``cli`` the ``eagle-eye agent`` command.
"""
