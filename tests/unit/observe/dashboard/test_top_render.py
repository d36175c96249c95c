"""``eagle-eye top``'s pure screen: sorting, keys, and what each line shows."""

from __future__ import annotations

from eagle_eye.fleet.view import FleetView
from eagle_eye.observe.dashboard.state import DashboardState
from eagle_eye.observe.dashboard.top_render import COLUMNS, View, render, sort_rows
from eagle_eye.snapshot import EngineState, Snapshot


def frame_of(*snaps: Snapshot, now: float = 1.0):  # type: ignore[no-untyped-def]
    fleet = FleetView()
    for s in snaps:
        fleet.apply(s, 0.0)
    return DashboardState(fleet).sample(now, 1_800_000_000.0)


def snap(name: str, **fields: object) -> Snapshot:
    return Snapshot(
        instance_id=name, model="llama", engine="vllm", seq=1, timestamp_s=1.0, **fields
    )  # type: ignore[arg-type]


def text(lines: list[list[tuple[str, object]]]) -> list[str]:
    return ["".join(t for t, _ in line) for line in lines]


def column(key: str) -> int:
    return next(i for i, c in enumerate(COLUMNS) if c.key == key)


def test_sorts_by_instance_name_first_then_by_the_chosen_column_busiest_first() -> None:
    frame = frame_of(snap("b", waiting=1), snap("a", waiting=7), snap("c", waiting=3, kv_usage=0.2))
    view = View()
    assert [r.key for r in sort_rows(frame.instances, view)] == ["a", "b", "c"]
    assert view.handle_key("w")
    assert view.descending
    assert [r.key for r in sort_rows(frame.instances, view)] == ["a", "c", "b"]
    view.handle_key("I")
    assert [r.key for r in sort_rows(frame.instances, view)] == ["b", "c", "a"]


def test_missing_values_sort_last_in_either_order() -> None:
    frame = frame_of(snap("a"), snap("b", kv_usage=0.5), snap("c", kv_usage=0.1))
    view = View()
    view.handle_key("k")
    assert [r.key for r in sort_rows(frame.instances, view)] == ["b", "c", "a"]
    view.handle_key("k")  # the same key again inverts
    assert [r.key for r in sort_rows(frame.instances, view)] == ["c", "b", "a"]


def test_angle_brackets_move_the_sort_column_and_q_quits() -> None:
    view = View()
    view.handle_key(">")
    assert COLUMNS[view.sort_index].key == "model"
    view.handle_key("<")
    view.handle_key("<")
    assert view.sort_index == 0
    assert view.handle_key("p") and view.paused
    assert not view.handle_key("q")


def test_screen_shows_totals_meters_rows_and_the_key_help_within_the_size() -> None:
    frame = frame_of(
        snap("engine-0", running=4, waiting=2, kv_usage=0.95, generation_tokens_per_s=812.0),
        snap("engine-1", state=EngineState.DRAINING, kv_usage=0.1),
    )
    view = View(sort_index=column("waiting"), descending=True)
    lines = render(
        frame, view, width=120, height=20, source="nats://x:4222", connected=True, now_wall_s=0
    )
    screen = text(lines)
    assert len(screen) == 20 and all(len(line) <= 120 for line in screen)
    assert "nats://x:4222 (connected)" in screen[0]
    assert "1/2 ready" in screen[1] and "1 draining" in screen[1] and "Waiting 2" in screen[1]
    assert any("engine-0" in line and "95.0%" in line and "|" in line for line in screen[2:4])
    header = next(i for i, line in enumerate(screen) if line.startswith("INSTANCE"))
    assert "WAIT▼" in screen[header]
    assert screen[header + 1].startswith("engine-0")
    assert "812" in screen[header + 1]
    assert "draining" in screen[header + 2]
    assert screen[-1].startswith(" q quit")


def test_ascii_mode_and_a_screen_before_the_first_snapshot() -> None:
    lines = render(
        None, View(), width=60, height=5, source="nats://x", connected=False, now_wall_s=0
    )
    screen = text(lines)
    assert "connecting" in screen[0] and "waiting for the first snapshot" in screen[1]
    frame = frame_of(snap("a"))
    ascii_screen = text(
        render(
            frame,
            View(),
            width=80,
            height=10,
            source="s",
            connected=True,
            now_wall_s=0,
            unicode=False,
        )
    )
    assert any("INSTANCE^" in line for line in ascii_screen)
    assert all(line.isascii() for line in ascii_screen)
