"""The router: fleet view from NATS, routing policies, the OpenAI-compatible gateway."""
