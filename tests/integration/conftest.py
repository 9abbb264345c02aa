"""Names the pipeline tests import from here; the harness itself lives in tests/harness.py."""

from tests.harness import BrokerThread, cluster_config, until

__all__ = ["BrokerThread", "cluster_config", "until"]
