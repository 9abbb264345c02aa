"""Segmented partition logs on disk: segments, offset/time indexes, checkpoints, and the log manager."""
