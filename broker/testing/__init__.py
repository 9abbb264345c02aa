"""Test support shipped with kafka-sim: an embedded cluster for a test process and the pytest plugin."""
