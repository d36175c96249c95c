"""Engine side: the background publisher, the vLLM plugin and the metrics agent."""
