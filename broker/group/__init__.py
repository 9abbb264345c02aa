"""Consumer groups: the classic group coordinator and the `__consumer_offsets` it keeps them in."""

from broker.group.coordinator import GroupCoordinator, await_callback
from broker.group.manager import OFFSETS_TOPIC

__all__ = ["OFFSETS_TOPIC", "GroupCoordinator", "await_callback"]
