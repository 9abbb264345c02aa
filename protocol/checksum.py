"""CRC-32C (Castagnoli), the checksum of record batches, of the metadata store's journal frames and
of producer snapshots: the crc32c package's C implementation, loaded without its package code."""

from __future__ import annotations

import functools
import importlib.machinery
import importlib.util
from collections.abc import Callable
from pathlib import Path

Data = bytes | bytearray | memoryview


def crc32c(data: Data) -> int:
    """The CRC-32C of `data`."""
    return _implementation()(data)


@functools.cache
def _implementation() -> Callable[[Data], int]:
    # The crc32c package's __init__ looks its own version up through importlib.metadata, which
    # imports the email package, csv and zipfile: ~15 ms, a tenth of `kafka-sim run`'s start-up.
    # A checksum needs only the package's extension module, so that is loaded on its own.
    spec = importlib.util.find_spec("crc32c")
    for folder in (spec.submodule_search_locations or ()) if spec else ():
        for suffix in importlib.machinery.EXTENSION_SUFFIXES:
            path = Path(folder) / f"_crc32c{suffix}"
            if path.is_file():
                loader = importlib.machinery.ExtensionFileLoader("crc32c._crc32c", str(path))
                module_spec = importlib.util.spec_from_loader("crc32c._crc32c", loader)
                module = importlib.util.module_from_spec(module_spec)
                loader.exec_module(module)
                return module.crc32c
    from crc32c import crc32c as implementation  # another layout: through the package

    return implementation
