"""How Eagle Eye starts long-lived child processes (nats-server, engines, peer routers).

Each child leads its own process group, so stopping it (``os.killpg``) also stops the
processes it forked (vLLM's engine core and workers, a router's workers). It stays in
its parent's *session*, though: ``start_new_session=True`` would also put it in a new
scheduler autogroup (Linux ``CONFIG_SCHED_AUTOGROUP``, on by default), and on this
project's 2-core machines a busy child in its own autogroup starved the parent for
0.3-4 s at a time. A load generator or a metrics sampler stalled like that misses the
very burst it was sampling (see docs/benchmarks/regressions.md, "empty bursts").
"""

from __future__ import annotations

import os
import sys
from typing import Any


def own_process_group() -> dict[str, Any]:
    """``subprocess.Popen`` keyword arguments: a new process group, the same session."""
    if sys.version_info >= (3, 11):
        return {"process_group": 0}
    return {"preexec_fn": os.setpgrp}  # pragma: no cover - Python 3.10 only
