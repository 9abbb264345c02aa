"""`kafka-sim simulate`: the embedded cluster on simulated time under a seeded fault schedule, a
built-in workload, and a checker of Kafka's guarantees over the history."""
