"""LogDirFailureChannel: where the log layer reports a log directory that failed an I/O call, and
KafkaStorageError, what the request that met the failure is answered with (KAFKA_STORAGE_ERROR).
"""

from __future__ import annotations

import errno
from collections.abc import Callable
from dataclasses import dataclass

from protocol.errors import ErrorCode, KafkaError


class KafkaStorageError(KafkaError):
    """An I/O error in the log layer, or a log on a directory already offline."""

    def __init__(self, message: str) -> None:
        super().__init__(ErrorCode.KAFKA_STORAGE_ERROR, message)


# Errors that say a path cannot be named on this file system (too long for PATH_MAX or the file
# system's own NAME_MAX, or characters it refuses): the disk is fine, only that one path fails.
NAME_ERRNOS = frozenset({errno.ENAMETOOLONG, errno.EINVAL, errno.EILSEQ})


def is_name_error(exc: OSError) -> bool:
    return exc.errno in NAME_ERRNOS


@dataclass(slots=True)
class OfflineLogDir:
    """A log dir gone offline, and why."""
    path: str
    reason: str  # the first error seen there


OfflineListener = Callable[[OfflineLogDir], None]


class LogDirFailureChannel:
    """The offline log directories of one broker. The first failure of a directory marks it offline
    and tells the listeners once (the broker then takes its partitions offline, or halts when it
    was the last directory); later failures there only raise. Listeners run inside the failing
    call: they must only schedule their work."""

    def __init__(self) -> None:
        self._offline: dict[str, OfflineLogDir] = {}
        self._listeners: list[OfflineListener] = []

    def add_listener(self, listener: OfflineListener) -> None:
        self._listeners.append(listener)

    def is_offline(self, log_dir: str) -> bool:
        return log_dir in self._offline

    def offline_log_dirs(self) -> list[OfflineLogDir]:
        return list(self._offline.values())

    def maybe_add_offline_log_dir(self, log_dir: str, reason: str) -> None:
        if log_dir in self._offline:
            return
        offline = self._offline[log_dir] = OfflineLogDir(log_dir, reason)
        for listener in self._listeners:
            listener(offline)

    def storage_error(self, log_dir: str, what: str, exc: OSError) -> KafkaStorageError:
        """Mark `log_dir` offline for `exc` met while doing `what`; the error to raise for it."""
        reason = f"Error while {what} in dir {log_dir}: {exc}"
        self.maybe_add_offline_log_dir(log_dir, reason)
        return KafkaStorageError(reason)

    def check_online(self, log_dir: str, what: str) -> None:
        """KafkaStorageError when `log_dir` is offline: nothing more is read or written there."""
        if log_dir in self._offline:
            raise KafkaStorageError(f"Error while {what}: log dir {log_dir} is offline")
