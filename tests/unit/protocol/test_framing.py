"""FrameDecoder: partial frames accumulate, bad lengths fail before any allocation."""

from __future__ import annotations

import pytest

from protocol import FrameDecoder, FrameTooLarge, InvalidFrame, ProtocolDecodeError, encode_frame


def test_encode_frame() -> None:
    assert encode_frame(b"abc") == b"\x00\x00\x00\x03abc"
    assert encode_frame(b"") == b"\x00\x00\x00\x00"


def test_whole_frames_in_one_feed() -> None:
    d = FrameDecoder()
    assert d.feed(encode_frame(b"one") + encode_frame(b"") + encode_frame(b"three")) == [b"one", b"", b"three"]
    assert d.buffered == 0


def test_byte_by_byte() -> None:
    d = FrameDecoder()
    stream = encode_frame(b"hello") + encode_frame(b"world!")
    out: list[bytes] = []
    for i in range(len(stream)):
        out += d.feed(stream[i : i + 1])
    assert out == [b"hello", b"world!"]
    assert d.buffered == 0


def test_partial_frame_is_kept() -> None:
    d = FrameDecoder()
    assert d.feed(b"\x00\x00\x00\x05he") == []
    assert d.buffered == 6
    assert d.feed(b"llo\x00\x00") == [b"hello"]
    assert d.feed(b"\x00\x01x") == [b"x"]


def test_negative_length() -> None:
    with pytest.raises(InvalidFrame):
        FrameDecoder().feed(b"\xff\xff\xff\xfe")


def test_too_large_rejected_from_the_length_alone() -> None:
    d = FrameDecoder(max_frame_bytes=1000)
    with pytest.raises(FrameTooLarge) as info:
        d.feed(b"\x00\x00\x03\xe9")  # 1001, no payload yet: rejected before waiting/allocating
    assert isinstance(info.value, ProtocolDecodeError)
    assert FrameDecoder(max_frame_bytes=1000).feed(encode_frame(b"x" * 1000)) == [b"x" * 1000]


def test_default_limit_is_100_mib() -> None:
    with pytest.raises(FrameTooLarge):
        FrameDecoder().feed(b"\x7f\xff\xff\xff")
    assert FrameDecoder().max_frame_bytes == 104857600
