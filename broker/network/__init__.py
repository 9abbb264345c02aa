"""The network layer (Kafka's SocketServer and RequestChannel): one task per client connection that
reads frames, hands each request to its handler in order, and writes the responses; on SASL
listeners the SASL authenticator sees a connection's frames until it has logged in.

May import: broker.handlers (the registry and BrokerServices), broker.control.faults,
broker.security (principals, mechanisms), protocol.
"""
