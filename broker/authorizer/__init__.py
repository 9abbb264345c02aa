"""The authorizer (Kafka's AclAuthorizer in ZooKeeper mode): ACLs kept in the metadata store and
cached on every broker, consulted by the handlers on the principal of each request.
May import: broker.metadata, broker.config, protocol.
"""
