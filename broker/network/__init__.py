"""The network layer (Kafka's SocketServer and RequestChannel): one task per client connection that
reads frames, hands each request to its handler in order, and writes the responses.

May import: broker.handlers (the registry and BrokerServices), broker.control.faults, protocol.
"""
