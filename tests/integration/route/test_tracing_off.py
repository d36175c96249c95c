"""With tracing off the router does not even import OpenTelemetry."""

from __future__ import annotations

import subprocess
import sys
import textwrap


def test_a_router_without_tracing_never_imports_opentelemetry() -> None:
    script = textwrap.dedent(
        """
        import asyncio, sys
        import aiohttp
        from eagle_eye.commands import router as command, up
        from eagle_eye.commands.tracing import tracing_from_env
        from eagle_eye.route.config import RouterConfig
        from eagle_eye.route.gateway import Router
        from eagle_eye.sim.fleet import SimFleet, SimFleetConfig

        async def main():
            assert tracing_from_env({}) is None
            async with SimFleet(SimFleetConfig(engines=1)) as fleet:
                async with Router(RouterConfig(port=0, backends=tuple(fleet.urls))) as router:
                    body = {"model": "sim-llama", "prompt": "Hi", "max_tokens": 2}
                    headers = {"traceparent": "00-" + "a" * 32 + "-" + "b" * 16 + "-01"}
                    async with aiohttp.ClientSession() as s:
                        async with s.post(router.url + "/v1/completions", json=body,
                                          headers=headers) as r:
                            assert r.status == 200, r.status
            loaded = sorted(m for m in sys.modules if m.startswith("opentelemetry"))
            print("LOADED", loaded)

        asyncio.run(main())
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert "LOADED []" in done.stdout, done.stdout
