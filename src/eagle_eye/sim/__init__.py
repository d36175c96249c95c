"""A GPU-free engine that behaves like vLLM: scheduler, KV cache, HTTP server, offline mode.

Pure core: ``tokens`` (prompts to block hashes), ``kv_cache`` (block pool with prefix
caching), ``cost_model`` (step time, named profiles), ``engine`` (vLLM V1's scheduler),
``step`` (a step's plan, cost and outcome), ``stats`` (vLLM-shaped per-step stats),
``fast_forward`` (runs of decode steps in closed form), ``protocol`` (OpenAI bodies to
work orders), ``metrics`` (``/metrics`` series as tables of specs). Edges: ``server``
(one engine on HTTP: ``process`` lifecycle and faults, ``loop`` stepping and publishing
through the real plugin, ``api/`` one module per API flavour) and ``fleet`` (many of
them), ``offline`` (virtual time, for benchmarks), ``cli`` (``eagle-eye sim``). See
``docs/simulator.md``.
"""
