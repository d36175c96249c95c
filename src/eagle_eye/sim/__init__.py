"""A GPU-free engine that behaves like vLLM: scheduler, KV cache, HTTP server, offline mode.

Pure core: ``tokens`` (prompts to block hashes), ``kv_cache`` (block pool with prefix
caching), ``cost_model`` (step time, named profiles), ``engine`` (vLLM V1's scheduler),
``stats`` (vLLM-shaped per-step stats). Edges: ``server`` and ``fleet`` (real-time HTTP
engines publishing through the real plugin), ``offline`` (virtual time, for benchmarks),
``cli`` (``eagle-eye sim``). See ``docs/simulator.md``.
"""
