"""A run directory mirrored as it is written: growing files by their new bytes, others whole, units last,
shared tables by their new rows; what a resumed run was given is not sent back."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from ctxbench.results.mirror import Mirror, Tail


def pair(tmp_path: Path) -> tuple[Path, Path, Tail, list[str]]:
    """A node's results directory, the driver's, a tail between them, and the log of what it sent."""
    node, driver = tmp_path / "node", tmp_path / "driver"
    (node / "runs" / "r1").mkdir(parents=True)
    mirror, sent = Mirror(str(driver)), []

    def send(method: str, args: tuple[object, ...]) -> None:
        sent.append(f"{method} {args[0]}")
        getattr(mirror, method)(*args)

    return node, driver, Tail(node, send), sent


def test_growing_files_go_as_their_new_bytes_and_units_go_last(tmp_path: Path) -> None:
    node, driver, tail, sent = pair(tmp_path)
    run = node / "runs" / "r1"
    (run / "units.jsonl").write_text('{"unit": "capacity"}\n')
    (run / "requests.jsonl").write_text("a\n")
    (run / "capacity.json").write_text("{}")
    tail.flush()
    assert sent[-1] == "write runs/r1/units.jsonl" and len(sent) == 3
    with (run / "requests.jsonl").open("a") as handle:
        handle.write("b\n")
    (run / "capacity.json").write_text('{"holds": true}')
    sent.clear()
    tail.flush()
    assert sorted(sent) == ["replace runs/r1/capacity.json", "write runs/r1/requests.jsonl"]
    assert (driver / "runs" / "r1" / "requests.jsonl").read_text() == "a\nb\n"
    assert (driver / "runs" / "r1" / "capacity.json").read_text() == '{"holds": true}'
    sent.clear()
    tail.flush()
    assert sent == []  # nothing changed, nothing sent


def test_a_shared_table_goes_as_whole_new_rows_under_the_drivers_header(tmp_path: Path) -> None:
    node, driver, tail, _ = pair(tmp_path)
    (driver / "ramp1m.csv").parent.mkdir(parents=True, exist_ok=True)
    (driver / "ramp1m.csv").write_text("run_id,turn\nother,1\n")  # another node's run got here first
    (node / "ramp1m.csv").write_text("run_id,turn\nr1,1\nr1,2")  # the last row is still being written
    tail.flush()
    assert (driver / "ramp1m.csv").read_text() == "run_id,turn\nother,1\nr1,1\n"
    with (node / "ramp1m.csv").open("a") as handle:
        handle.write("\n")
    tail.flush()
    assert (driver / "ramp1m.csv").read_text() == "run_id,turn\nother,1\nr1,1\nr1,2\n"
    (driver / "ramp1m.csv").unlink()
    with (node / "ramp1m.csv").open("a") as handle:
        handle.write("r1,3\n")
    tail.flush()
    assert (driver / "ramp1m.csv").read_text() == "run_id,turn\nr1,3\n"  # a new file gets the header


def test_a_resumed_run_sends_only_what_it_adds(tmp_path: Path) -> None:
    node, driver, tail, sent = pair(tmp_path)
    mirror = Mirror(str(driver))
    mirror.replace("runs/r1/manifest.json", b"{}")
    mirror.write("runs/r1/requests.jsonl", 0, b"a\n")
    for relative, data in mirror.files("r1").items():
        (node / "runs" / "r1" / relative).write_bytes(data)
    tail.already_sent()
    tail.flush()
    assert sent == []
    with (node / "runs" / "r1" / "requests.jsonl").open("a") as handle:
        handle.write("b\n")
    tail.flush()
    assert sent == ["write runs/r1/requests.jsonl"]
    assert (driver / "runs" / "r1" / "requests.jsonl").read_text() == "a\nb\n"


def test_a_repeated_send_writes_the_same_bytes_again_and_nothing_leaves_the_results(tmp_path: Path) -> None:
    mirror = Mirror(str(tmp_path))
    mirror.write("runs/r1/requests.jsonl", 0, b"a\nb\n")
    mirror.write("runs/r1/requests.jsonl", 2, b"b\n")
    assert (tmp_path / "runs" / "r1" / "requests.jsonl").read_bytes() == b"a\nb\n"
    with pytest.raises(ValueError, match="outside the results directory"):
        mirror.replace("../elsewhere.json", b"{}")


def test_without_ray_the_error_says_how_to_install_it(monkeypatch: pytest.MonkeyPatch) -> None:
    from ctxbench.campaigns.distributed import RayNotInstalled, require_ray

    monkeypatch.setitem(sys.modules, "ray", None)
    with pytest.raises(RayNotInstalled, match=r"pip install 'ctxbench\[ray\]'"):
        require_ray()


def test_a_unit_finished_during_a_flush_waits_for_its_files(tmp_path: Path) -> None:
    """The check goes on while a flush runs: here it writes needle.json and marks the needle unit finished
    just after the flush listed the files (in the middle of its first send). The driver must not hold the
    unit without its file, or a node lost then would lose what the unit measured (seen once over Ray under
    the stress harness)."""
    node, driver, tail, sent = pair(tmp_path)
    run = node / "runs" / "r1"
    (run / "units.jsonl").write_text('{"unit": "capacity"}\n')
    (run / "capacity.json").write_text("{}")
    (node / "ramp1m.csv").write_text("run_id,turn\n")
    send = tail.send

    def check_ends_meanwhile(method: str, args: tuple[object, ...]) -> None:
        if not (run / "needle.json").exists():
            (run / "needle.json").write_text('{"found": 1}')
            with (node / "ramp1m.csv").open("a") as handle:
                handle.write("r1,1\n")
            with (run / "units.jsonl").open("a") as handle:
                handle.write('{"unit": "needle"}\n')
        send(method, args)

    tail.send = check_ends_meanwhile
    tail.flush()
    mirrored = driver / "runs" / "r1"
    assert (mirrored / "units.jsonl").read_text() == '{"unit": "capacity"}\n'
    assert not (mirrored / "needle.json").exists()
    tail.flush()  # the next flush (the unit's own, or the timer's) sends the file, then the unit
    assert sent[-1] == "write runs/r1/units.jsonl"
    assert (mirrored / "units.jsonl").read_text().endswith('{"unit": "needle"}\n')
    assert (mirrored / "needle.json").read_text() == '{"found": 1}'
