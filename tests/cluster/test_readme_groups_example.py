"""The consumer-group example of docs/groups-and-transactions.md works as written against a 3-broker cluster."""

from __future__ import annotations

import re

import pytest

from tests.docs import section


@pytest.mark.slow
def test_readme_group_example(broker_factory, capsys):
    cluster = broker_factory({"group.initial.rebalance.delay.ms": "0"}, brokers=3)
    text = section("docs/groups-and-transactions.md", "## Consumer groups")
    example = re.search(r"```python\n(.*?)```", text, re.S).group(1)
    bootstrap = "localhost:9092,localhost:9093,localhost:9094"
    assert bootstrap in example
    exec(example.replace(bootstrap, cluster.bootstrap), {})
    lines = capsys.readouterr().out.splitlines()
    assert all(line.startswith("cook-1 ") for line in lines), lines  # cook-2 resumes: nothing new
    assert sorted(line.split(" ", 5)[5] for line in lines) == sorted(
        f"b'pizza {i}'" for i in range(8))
