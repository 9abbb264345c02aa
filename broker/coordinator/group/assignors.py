"""The server-side assignors of KIP-848 consumer groups (`group.consumer.assignors`): `uniform`
(the default) spreads every subscribed partition evenly and keeps each where it was when it can;
`range` gives each topic's partitions to its subscribers in contiguous ranges, as the classic
RangeAssignor does on the client."""

from __future__ import annotations

from collections.abc import Mapping

# member id -> topic -> partitions
Assignment = dict[str, dict[str, set[int]]]


def uniform(subscriptions: Mapping[str, set[str]], partitions: Mapping[str, int],
            current: Assignment) -> Assignment:
    """Balanced to within one partition per member among the members subscribed to a partition's
    topic, sticky: a partition stays with its owner in `current` while that owner is below its
    share. Members and partitions are taken in sorted order, so the result is deterministic."""
    members = sorted(subscriptions)
    target: Assignment = {m: {} for m in members}
    load = dict.fromkeys(members, 0)
    every = [(t, p) for t in sorted(partitions) for p in range(partitions[t])
             if any(t in subscriptions[m] for m in members)]
    owner = {(t, p): m for m, topics in current.items() if m in load
             for t, ps in topics.items() for p in ps}
    # Each member's share: the partitions it can take, divided among those who can take them
    # (exact for a group whose members subscribe alike, the common case).
    share = {}
    for m in members:
        mine = sum(1 for t, _ in every if t in subscriptions[m])
        rivals = sum(1 for r in members if subscriptions[r] & subscriptions[m]) or 1
        share[m] = -(-mine // rivals)  # ceiling
    left = []
    for tp in every:  # first pass: what stays where it is
        m = owner.get(tp)
        if m is not None and tp[0] in subscriptions[m] and load[m] < share[m]:
            target[m].setdefault(tp[0], set()).add(tp[1])
            load[m] += 1
        else:
            left.append(tp)
    for topic, partition in left:  # then the least loaded subscriber takes each
        m = min((r for r in members if topic in subscriptions[r]), key=lambda r: (load[r], r))
        target[m].setdefault(topic, set()).add(partition)
        load[m] += 1
    return target


def range_(subscriptions: Mapping[str, set[str]], partitions: Mapping[str, int],
           current: Assignment) -> Assignment:
    """Per topic, its subscribers in member id order take contiguous ranges, the first ones one
    partition more when the count does not divide."""
    target: Assignment = {m: {} for m in subscriptions}
    for topic in sorted(partitions):
        subscribers = sorted(m for m, topics in subscriptions.items() if topic in topics)
        if not subscribers:
            continue
        count = partitions[topic]
        each, extra = divmod(count, len(subscribers))
        start = 0
        for i, m in enumerate(subscribers):
            size = each + (1 if i < extra else 0)
            if size:
                target[m][topic] = set(range(start, start + size))
            start += size
    return target


ASSIGNORS = {"uniform": uniform, "range": range_}
