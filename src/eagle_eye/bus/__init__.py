"""NATS plumbing shared by every component: connection options and an embedded server."""
