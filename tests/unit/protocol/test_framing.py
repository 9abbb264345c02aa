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


def test_a_large_frame_is_received_into_its_own_buffer_in_any_pieces() -> None:
    from protocol.framing import LARGE_FRAME_BYTES

    big = bytes(range(256)) * (LARGE_FRAME_BYTES // 256 + 1)
    stream = encode_frame(b"a") + encode_frame(big) + encode_frame(b"bc")
    for step in (1000, 65_536, 300_000, len(stream)):
        d = FrameDecoder()
        out = []
        for i in range(0, len(stream), step):
            out += d.feed(stream[i : i + step])
            received = min(i + step, len(stream))
            if 5 + 4 <= received < 5 + 4 + len(big):  # inside the large frame: its size known
                assert d.incomplete_size == len(big) and d.buffered == received - 9
        assert [bytes(f) for f in out] == [b"a", big, b"bc"] and d.buffered == 0
