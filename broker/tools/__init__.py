"""Console tools in the spirit of Kafka's scripts (`kafka-sim topics`, `produce`, `consume`,
`groups`): clients of a running broker over the Kafka protocol, through kafka-python."""
