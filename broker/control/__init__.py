"""Seeing and bending the cluster: the HTTP control API over a ClusterControl, its Python client,
`kafka-sim ctl`, and the faults injected on the request path.

May import: protocol (nothing else of broker: the server hands it a ClusterControl).
"""
