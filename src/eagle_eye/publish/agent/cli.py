"""``eagle-eye agent``: publish snapshots for engines that have no Eagle Eye plugin.

Per-engine options (``--kind``, ``--advertise``, ``--instance-id``, ``--model``) pair
with ``--engine`` by position; given once, ``--kind`` applies to every engine. NATS and
subject settings come from ``--nats`` and the same ``EAGLE_EYE_*`` variables the plugin
reads, so a sidecar is configured like the engine it sits next to.
"""

from __future__ import annotations

import logging
import os
import signal
from collections.abc import Sequence
from types import FrameType
from typing import TypeVar

import click

from eagle_eye.publish.agent.config import AgentConfig, EngineTarget
from eagle_eye.publish.agent.engines import EngineKind
from eagle_eye.publish.agent.http import DEFAULT_MAX_PAGE_BYTES
from eagle_eye.publish.agent.runner import Agent
from eagle_eye.publish.publisher import Publisher
from eagle_eye.settings import SettingsError, nats_from_env, publisher_from_env

log = logging.getLogger("eagle_eye.agent")

_KINDS = ["auto", *(k.value for k in EngineKind)]
T = TypeVar("T")


def _per_engine(name: str, values: Sequence[T], count: int) -> list[T | None]:
    """Pair a repeated option with the engines: none, one per engine, or one for one."""
    if not values:
        return [None] * count
    if len(values) == count:
        return list(values)
    raise click.UsageError(
        f"--{name} was given {len(values)} times for {count} engines: give it once per "
        "--engine, in the same order"
    )


def build_targets(
    engines: Sequence[str],
    kinds: Sequence[str],
    advertise: Sequence[str],
    instance_ids: Sequence[str],
    models: Sequence[str],
    env: dict[str, str] | None = None,
) -> list[EngineTarget]:
    """The watch list from CLI values; a single engine also takes ``EAGLE_EYE_ENDPOINT``
    and ``EAGLE_EYE_INSTANCE_ID`` (the sidecar case)."""
    env = dict(os.environ) if env is None else env
    count = len(engines)
    kind_list: list[str | None] = (
        [kinds[0]] * count if len(kinds) == 1 else _per_engine("kind", kinds, count)
    )
    adv_list = _per_engine("advertise", advertise, count)
    id_list = _per_engine("instance-id", instance_ids, count)
    model_list = _per_engine("model", models, count)
    if count == 1:
        adv_list[0] = adv_list[0] or env.get("EAGLE_EYE_ENDPOINT") or None
        id_list[0] = id_list[0] or env.get("EAGLE_EYE_INSTANCE_ID") or None
    targets = []
    for url, kind, adv, instance_id, model in zip(
        engines, kind_list, adv_list, id_list, model_list, strict=True
    ):
        if not url.startswith(("http://", "https://")):
            raise click.BadParameter(f"{url!r}: use http://HOST:PORT", param_hint="--engine")
        targets.append(
            EngineTarget(
                url=url,
                kind=None if kind in (None, "auto") else EngineKind(kind),
                advertise=adv or None,
                instance_id=instance_id or None,
                model=model or None,
            )
        )
    return targets


@click.command("agent")
@click.option(
    "--engine",
    "engines",
    multiple=True,
    required=True,
    metavar="URL",
    help="Engine base URL (or its full /metrics URL); repeat to watch several.",
)
@click.option(
    "--kind",
    "kinds",
    multiple=True,
    type=click.Choice(_KINDS),
    help="Engine kind (default auto: detected from the metric families).",
)
@click.option("--nats", "nats_url", envvar="EAGLE_EYE_NATS_URL", required=True, help="NATS URL(s).")
@click.option(
    "--interval",
    "interval_s",
    type=click.FloatRange(min=0.01),
    default=0.1,
    show_default=True,
    help="Seconds between scrapes of each engine.",
)
@click.option(
    "--advertise",
    multiple=True,
    metavar="URL",
    help="Endpoint routers should call, per engine (default: the --engine URL).",
)
@click.option("--instance-id", "instance_ids", multiple=True, help="Instance id, per engine.")
@click.option(
    "--model", "models", multiple=True, help="Model name, per engine, when the page lacks it."
)
@click.option(
    "--unreachable-after",
    type=click.IntRange(min=1),
    default=3,
    show_default=True,
    help="Failed scrapes before 'unreachable' is published.",
)
@click.option(
    "--max-backoff",
    "max_backoff_s",
    type=click.FloatRange(min=0.01),
    default=2.0,
    show_default=True,
    help="Longest pause between retries of an unreachable engine, seconds.",
)
@click.option(
    "--timeout",
    "timeout_s",
    type=click.FloatRange(min=0.01),
    default=1.0,
    show_default=True,
    help="Per-request timeout, seconds.",
)
@click.option(
    "--max-page-bytes",
    type=click.IntRange(min=1024),
    default=DEFAULT_MAX_PAGE_BYTES,
    show_default=True,
    help="Larger pages count as parse errors.",
)
def agent(
    engines: tuple[str, ...],
    kinds: tuple[str, ...],
    nats_url: str,
    interval_s: float,
    advertise: tuple[str, ...],
    instance_ids: tuple[str, ...],
    models: tuple[str, ...],
    unreachable_after: int,
    max_backoff_s: float,
    timeout_s: float,
    max_page_bytes: int,
) -> None:
    """Scrape engines' own /metrics and publish Eagle Eye snapshots to NATS.

    For SGLang, Ray Serve, TGI, llama.cpp, and vLLM images nobody may change. Run it as a
    sidecar (--engine http://127.0.0.1:8000 --advertise http://$POD_IP:8000) or as one
    process watching several engines.
    """
    try:
        settings = publisher_from_env()
        nats = nats_from_env(os.environ, url=nats_url)
    except SettingsError as exc:
        raise click.UsageError(str(exc)) from None
    if nats is None:
        raise click.UsageError("--nats is empty: give a URL like nats://127.0.0.1:4222")
    targets = build_targets(engines, kinds, advertise, instance_ids, models)
    config = AgentConfig(
        interval_s=interval_s,
        timeout_s=timeout_s,
        unreachable_after=unreachable_after,
        max_backoff_s=max_backoff_s,
        max_page_bytes=max_page_bytes,
    )
    publisher = Publisher(
        nats,
        subject=settings.subject,
        subject_mode=settings.subject_mode,
        heartbeat_s=settings.heartbeat_s,
        client_name="eagle-eye-agent",
    )
    runner = Agent(targets, publisher, config)

    def on_signal(signum: int, _frame: FrameType | None) -> None:
        log.info("agent: signal %d, stopping", signum)
        runner.request_stop()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    runner.start()
    log.info(
        "agent: watching %s every %.3fs, publishing to %s",
        ", ".join(t.url for t in targets),
        interval_s,
        nats.display_url,
    )
    while not runner.wait(1.0):
        pass
    runner.stop()
