"""A GPU-free engine that behaves like vLLM: scheduler, KV cache, HTTP server, offline mode."""
