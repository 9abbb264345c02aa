"""Authentication, as Kafka's common.security: TLS contexts from the ssl.* settings, the principal a
client certificate gives, the SASL mechanisms (PLAIN, SCRAM-SHA-256/512) and SCRAM credentials.

May import: broker.config, broker.metadata.
"""
