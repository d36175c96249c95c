"""The root of every error Eagle Eye raises.

Each error class derives from ``EagleEyeError`` *and* from the builtin that says what
kind of failure it is, so callers can catch either ``except EagleEyeError`` (anything of
ours) or the usual builtin (``except ValueError`` around a parse)::

    EagleEyeError
    ├── SnapshotError (ValueError)         snapshot.py: a message that is not a valid snapshot
    ├── SettingsError (ValueError)         settings.py: misconfiguration, names the variable
    ├── EmbeddedNatsError (RuntimeError)   bus/embedded.py: the local nats-server failed
    ├── PromParseError (ValueError)        publish/agent: a /metrics page we cannot read
    ├── MappingError, LoadsError, TruncatedPageError, PageTooLargeError (ValueError),
    │   FetchError (OSError)               publish/agent: the rest of a scrape's failures
    ├── ApiError                           route/requests.py: an OpenAI-style HTTP error
    ├── ProfileError (ValueError)          route/policies: a routing profile that is wrong
    ├── PrometheusError (RuntimeError)     observe/dashboard: the history query failed
    ├── BadRequest, RequestRejectedError, KVCacheFullError   sim/
    ├── TracingConfigError (ValueError)    commands/tracing.py: OTEL_* or tracing flags
    ├── BundleError (RuntimeError)         deploy/: the ConfigMap bundle
    └── TraceError, PeerError, BenchError, VllmServerError   bench/

Third-party errors are translated at the boundary with ``raise Ours(...) from exc``.
This module imports nothing, so every layer (the engine-side install included) can use it.
"""

from __future__ import annotations


class EagleEyeError(Exception):
    """Base class of every exception Eagle Eye defines."""
