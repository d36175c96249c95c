"""Eagle Eye: per-step LLM engine metrics over NATS and routing that uses them."""

__version__ = "0.1.0"
