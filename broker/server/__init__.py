"""Putting a broker together (Kafka's KafkaServer and Kafka.main): KafkaServer wires every subsystem
of one broker, Cluster runs N of them in one process, the CLI starts it and the control API.

May import: every other package of broker.
"""
