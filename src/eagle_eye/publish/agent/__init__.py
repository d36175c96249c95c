"""The metrics agent: publish snapshots for engines that have no plugin hook.

``watcher`` scrapes one engine per thread and offers samples to the shared publisher,
``http`` is the stdlib keep-alive fetcher (the sidecar needs only the engine-side
install), ``promtext`` a targeted Prometheus text parser, ``engines/`` one data table
per engine kind (vLLM, SGLang, TGI, llama.cpp, Ray Serve), ``track`` the per-rank
bookkeeping, ``models`` model discovery, ``cli`` the ``eagle-eye agent`` command.
"""
