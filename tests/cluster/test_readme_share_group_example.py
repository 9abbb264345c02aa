"""The share group example of docs/groups-and-transactions.md works as written against a
3-broker cluster: six tickets handled once each, the released one on its second delivery."""

from __future__ import annotations

import re

import pytest

from tests.docs import section


@pytest.mark.slow
def test_share_group_example(broker_factory, capsys):
    cluster = broker_factory({"offsets.topic.num.partitions": "3",
                              "share.coordinator.state.topic.num.partitions": "3"}, brokers=3)
    text = section("docs/groups-and-transactions.md", "### Share groups (KIP-932, queues)")
    example = re.search(r"```python\n(.*?)```", text, re.S).group(1)
    bootstrap = "localhost:9092,localhost:9093,localhost:9094"
    assert bootstrap in example
    exec(example.replace(bootstrap, cluster.bootstrap), {})
    lines = capsys.readouterr().out.splitlines()
    handled = {line.split(" ", 2)[2].rsplit(" delivery ", 1)[0]: line.rsplit(" ", 1)[1]
               for line in lines}
    assert handled == {f"b'ticket {i}'": "2" if i == 3 else "1" for i in range(6)}, lines
    assert {line.split()[0] for line in lines} <= {"agent-0", "agent-1"}
