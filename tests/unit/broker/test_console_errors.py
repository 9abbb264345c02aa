"""How the console tools word a failure: Kafka's error name and explanation for a broker's error
(never the request kafka-python quotes), kafka-python's own words for a client-side one."""

from __future__ import annotations

from kafka import errors

from broker.tools.command import error_line


def test_a_broker_error_is_named_as_kafka_names_it():
    exc = errors.UnknownTopicOrPartitionError("Request 'DeleteTopicsRequest(...)' failed ...")
    assert error_line(exc) == ("UNKNOWN_TOPIC_OR_PARTITION: This request is for a topic or "
                               "partition that does not exist on this broker.")


def test_a_client_error_keeps_its_first_line():
    assert error_line(errors.KafkaConnectionError("reset\nmore")) == "KafkaConnectionError: reset"
    assert error_line(errors.IllegalStateError()) == "IllegalStateError"
