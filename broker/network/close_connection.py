"""The one exception the network layer closes a connection with (and no other)."""


class CloseConnection(Exception):
    """The peer sent something that leaves no way to answer; drop this connection only."""
