"""protocol/checksum.py: CRC-32C from the crc32c package's extension module, as the package computes it."""

from __future__ import annotations

import crc32c as package

from protocol.checksum import crc32c


def test_the_check_value_of_crc32c():
    assert crc32c(b"123456789") == 0xE3069283  # the catalogue's check value for CRC-32C


def test_it_agrees_with_the_package_on_every_buffer_kind():
    data = bytes(range(256)) * 33
    expected = package.crc32c(data)
    assert crc32c(data) == crc32c(bytearray(data)) == crc32c(memoryview(data)) == expected
    assert crc32c(memoryview(data)[7:100]) == package.crc32c(data[7:100])
    assert crc32c(b"") == 0
