"""Subject naming and the EAGLE_EYE_* settings: defaults and one precise error per mistake."""

from __future__ import annotations

from pathlib import Path

import pytest

from eagle_eye import subjects
from eagle_eye.settings import (
    SettingsError,
    publisher_from_env,
    server_port_from_argv,
)
from eagle_eye.subjects import SubjectMode


def test_default_subject_is_the_seeds_subject() -> None:
    assert subjects.ROUTING_METRICS == "eagle_eye.routing_metrics"
    assert publisher_from_env({}).subject == "eagle_eye.routing_metrics"


def test_flat_mode_publishes_on_the_base_subject() -> None:
    subject = subjects.snapshot_subject(
        subjects.ROUTING_METRICS, SubjectMode.FLAT, model="m", instance_id="i"
    )
    assert subject == "eagle_eye.routing_metrics"


def test_hierarchical_subject_sanitises_model_and_instance_tokens() -> None:
    subject = subjects.snapshot_subject(
        subjects.ROUTING_METRICS,
        SubjectMode.HIERARCHICAL,
        model="meta-llama/Llama-3.1 8B.*",
        instance_id="pod.a>b",
        dp_rank=2,
    )
    assert subject == "eagle_eye.routing_metrics.meta-llama_Llama-3_1_8B.pod_a_b-dp2"
    subjects.validate_subject(subject)


@pytest.mark.parametrize("bad", ["", "a..b", "a.*", "a.>", "has space"])
def test_invalid_subjects_are_refused(bad: str) -> None:
    with pytest.raises(ValueError):
        subjects.validate_subject(bad)


def test_no_nats_url_means_inert() -> None:
    assert publisher_from_env({}).nats is None


def test_full_configuration_is_read(tmp_path: Path) -> None:
    creds = tmp_path / "user.creds"
    creds.write_text("x")
    settings = publisher_from_env(
        {
            "EAGLE_EYE_NATS_URL": "nats://a:4222, nats://b:4222",
            "EAGLE_EYE_SUBJECT_MODE": "hierarchical",
            "EAGLE_EYE_INSTANCE_ID": "pod-1",
            "EAGLE_EYE_ENDPOINT": "http://10.1.2.3:8000/",
            "EAGLE_EYE_PORT": "8001",
            "EAGLE_EYE_HEARTBEAT_S": "0.5",
            "EAGLE_EYE_NATS_TOKEN": "secret",
            "EAGLE_EYE_NATS_CREDS": str(creds),
        }
    )
    assert settings.nats is not None
    assert settings.nats.servers == ("nats://a:4222", "nats://b:4222")
    assert settings.nats.token == "secret" and settings.nats.creds_file == str(creds)
    assert settings.subject_mode is SubjectMode.HIERARCHICAL
    assert settings.endpoint == "http://10.1.2.3:8000"
    assert (settings.port, settings.heartbeat_s, settings.instance_id) == (8001, 0.5, "pod-1")


@pytest.mark.parametrize(
    ("env", "message"),
    [
        (
            {"EAGLE_EYE_NATS_URL": "localhost:4222"},
            "EAGLE_EYE_NATS_URL='localhost:4222' is not a NATS URL",
        ),
        ({"EAGLE_EYE_NATS_URL": "nats://h:99999"}, "invalid port"),
        ({"EAGLE_EYE_NATS_URL": " , "}, "EAGLE_EYE_NATS_URL is empty"),
        ({"EAGLE_EYE_SUBJECT_MODE": "tree"}, "use 'flat' or 'hierarchical'"),
        ({"EAGLE_EYE_SUBJECT": "a.>"}, "EAGLE_EYE_SUBJECT"),
        ({"EAGLE_EYE_ENDPOINT": "10.0.0.1:8000"}, "EAGLE_EYE_ENDPOINT"),
        ({"EAGLE_EYE_PORT": "http"}, "EAGLE_EYE_PORT"),
        ({"EAGLE_EYE_HEARTBEAT_S": "-1"}, "EAGLE_EYE_HEARTBEAT_S"),
        (
            {"EAGLE_EYE_NATS_URL": "nats://h:1", "EAGLE_EYE_NATS_CREDS": "/nonexistent"},
            "no such file",
        ),
    ],
)
def test_each_mistake_gets_one_precise_message(env: dict[str, str], message: str) -> None:
    with pytest.raises(SettingsError, match=message.replace("?", r"\?").replace("(", r"\(")):
        publisher_from_env(env)


def test_credentials_never_appear_in_display_url() -> None:
    settings = publisher_from_env({"EAGLE_EYE_NATS_URL": "nats://user:pw@host:4222"})
    assert settings.nats is not None
    assert "pw" not in settings.nats.display_url and "host:4222" in settings.nats.display_url


@pytest.mark.parametrize(
    ("argv", "port"),
    [
        (["vllm", "serve", "m", "--port", "8123"], 8123),
        (["x", "--port=9000"], 9000),
        (["x", "--port"], 8000),
        (["x", "--port", "nope"], 8000),
    ],
)
def test_server_port_is_read_from_argv(argv: list[str], port: int) -> None:
    assert server_port_from_argv(argv) == port
