"""One simulated engine on HTTP: its process lifecycle, its step loop, its APIs.

* ``process``: ``SimEngineServer``: start/stop, the faults (kill, restart, draining),
  publishing through the real plugin, admission of requests
* ``loop``: ``EngineLoop``: steps the ``EngineCore`` in scaled real time and records
  every step to ``/metrics`` and to the vLLM plugin's ``EngineStatLogger.record()``
* ``connections``: the open connections a kill resets
* ``spec``: ``EngineSpec``, what defines an engine
* ``api``: the routes, one module per API flavour (OpenAI, vLLM legacy, SGLang)
"""

from __future__ import annotations

from eagle_eye.sim.server.process import SimEngineServer
from eagle_eye.sim.server.spec import EngineSpec

__all__ = ["EngineSpec", "SimEngineServer"]
