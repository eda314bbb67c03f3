"""The SSE decoder on streams split at every possible byte."""

from __future__ import annotations

import pytest

from ctxbench.client.sse import SseDecoder


def decode(*parts: bytes) -> list[str]:
    decoder = SseDecoder()
    events = [event for part in parts for event in decoder.feed(part)]
    return events + list(decoder.close())


STREAM = (
    b": keep-alive comment\n\n"
    b'data: {"a": 1}\n\n'
    b'data:{"b": "\xc3\xa9t\xc3\xa9"}\r\n\r\n'
    b"event: ignored\ndata: line one\ndata: line two\n\n"
    b"data: [DONE]\n\n"
)
EXPECTED = ['{"a": 1}', '{"b": "été"}', "line one\nline two", "[DONE]"]


def test_events_are_the_same_whatever_the_split() -> None:
    for cut in range(len(STREAM) + 1):
        assert decode(STREAM[:cut], STREAM[cut:]) == EXPECTED, cut


def test_byte_by_byte_feed_gives_the_same_events() -> None:
    assert decode(*(STREAM[i : i + 1] for i in range(len(STREAM)))) == EXPECTED


@pytest.mark.parametrize("end", [b"\n", b"\r\n", b"\r"])
def test_every_line_ending_works(end: bytes) -> None:
    assert decode(b"data: x" + end + end + b"data: y" + end + end) == ["x", "y"]


def test_cr_at_the_end_of_a_read_waits_for_a_possible_lf() -> None:
    assert decode(b"data: x\r", b"\n\r", b"\n") == ["x"]


def test_unterminated_last_event_is_yielded_at_close() -> None:
    assert decode(b'data: {"last": true}') == ['{"last": true}']


def test_lines_without_data_field_yield_nothing() -> None:
    assert decode(b"id: 3\nretry: 10\n\n: only a comment\n\n") == []


LF_STREAM = (
    b'data: {"a": 1}\n\n'
    b": comment\n\n"
    b'data:{"b": "\xc3\xa9t\xc3\xa9"}\n\n'
    b"\n\n"
    b"event: ignored\ndata: line one\ndata: line two\n\n\n"
    b"data:  two spaces\n\n"
    b"data: [DONE]\n\n"
)
LF_EXPECTED = ['{"a": 1}', '{"b": "été"}', "line one\nline two", " two spaces", "[DONE]"]


def test_lf_only_streams_take_the_whole_event_path_and_agree_at_every_split() -> None:
    # Without CR, whole events are cut at the blank line; every other form falls back to the line rules.
    for cut in range(len(LF_STREAM) + 1):
        for second in range(cut, len(LF_STREAM) + 1, 7):
            parts = (LF_STREAM[:cut], LF_STREAM[cut:second], LF_STREAM[second:])
            assert decode(*parts) == LF_EXPECTED, (cut, second)
