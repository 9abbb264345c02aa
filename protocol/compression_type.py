"""The compression codecs a record batch's attributes name (Kafka's CompressionType): their ids
and names, for what needs to know a codec without compressing (configs, the pipeline)."""

from __future__ import annotations

NO_COMPRESSION, GZIP, SNAPPY, LZ4, ZSTD = 0, 1, 2, 3, 4
CODEC_NAMES = ("none", "gzip", "snappy", "lz4", "zstd")
