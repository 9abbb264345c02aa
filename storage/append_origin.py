"""Who appends to a log (Kafka's AppendOrigin): what the log checks depends on it."""

from __future__ import annotations

import enum


class AppendOrigin(enum.Enum):
    """Who appends (Kafka's AppendOrigin): a client's Produce is validated in full; the transaction
    coordinator may also write control batches (markers); replication appends as they are."""

    CLIENT = "client"
    COORDINATOR = "coordinator"
    REPLICATION = "replication"
