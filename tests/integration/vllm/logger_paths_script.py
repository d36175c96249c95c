"""Drive vLLM's own stat-logger machinery with our plugin, without starting an engine.

Run with the vLLM venv's python. ``StatLoggerManager`` is what ``AsyncLLM`` builds from
its ``stat_loggers=[...]`` argument plus the ``vllm.stat_logger_plugins`` entry points,
so this exercises both ways in on a real ``VllmConfig``, with real stats objects, in
seconds instead of a 30-90 s engine start (and vLLM's import once for three cases).

    python logger_paths_script.py NATS_URL

Phases, each announced by a ``PHASE name`` line and ended by a ``RESULT {json}`` line:
``no-url`` and ``bad-url`` (entry-point discovery; no or a malformed EAGLE_EYE_NATS_URL),
then ``explicit`` (``stat_loggers=[EagleEyeStatLogger]`` with vLLM's plugins disabled,
publishing to NATS_URL).
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
from pathlib import Path

_PHASE_ENV = {
    "no-url": {},
    "bad-url": {"EAGLE_EYE_NATS_URL": "http://nats:4222"},
    "explicit": {
        "VLLM_PLUGINS": "eagle_eye_plugins_disabled",
        "EAGLE_EYE_INSTANCE_ID": "explicit-stat-loggers",
    },
}


def main(nats_url: str) -> None:
    for phase, env in _PHASE_ENV.items():
        for name in ("VLLM_PLUGINS", "EAGLE_EYE_NATS_URL", "EAGLE_EYE_INSTANCE_ID"):
            os.environ.pop(name, None)
        os.environ.update(env)
        if phase == "explicit":
            os.environ["EAGLE_EYE_NATS_URL"] = nats_url
        print(f"PHASE {phase}", flush=True)
        run_phase(phase)


def run_phase(phase: str) -> None:
    from vllm.v1.metrics.loggers import StatLoggerManager, load_stat_logger_plugin_factories

    from eagle_eye.bench.publisher import busy_step_stats, tiny_vllm_config
    from eagle_eye.publish.vllm_plugin import EagleEyeStatLogger

    with tempfile.TemporaryDirectory() as tmp:
        vllm_config = tiny_vllm_config(Path(tmp))
    factories = load_stat_logger_plugin_factories()
    custom = [EagleEyeStatLogger] if phase == "explicit" else []
    manager = StatLoggerManager(vllm_config, custom_stat_loggers=[*custom, *factories])
    manager.log_engine_initialized()
    for step in range(5):
        manager.record(*busy_step_stats(step), engine_idx=0)
    manager.record_sleep_state(1, 1)
    ours = [
        logger
        for adapter in manager.stat_loggers
        for logger in getattr(adapter, "per_engine_stat_loggers", {}).values()
        if isinstance(logger, EagleEyeStatLogger)
    ]
    result = {
        "phase": phase,
        "plugin_factories": [f"{f.__module__}.{f.__qualname__}" for f in factories],
        "instances": len(ours),
        "publishing": [logger.channel is not None for logger in ours],
        "record_errors": sum(logger.errors for logger in ours),
    }
    if phase == "explicit" and ours and ours[0].channel is not None:
        from eagle_eye.publish.vllm_plugin import shared_publisher
        from eagle_eye.settings import publisher_from_env

        publisher = shared_publisher(publisher_from_env())  # the one the plugin uses
        result["connected"] = publisher.wait_connected(10.0)
        publisher.close()
        result["sent"] = publisher.stats.sent
    sys.stderr.flush()
    print("RESULT " + json.dumps(result), flush=True)


if __name__ == "__main__":
    main(sys.argv[1])
