"""Client quotas (Kafka's ClientQuotaManager, ClientRequestQuotaManager and the throttled-channel
delay queue): rates per user / client-id, throttle times, and the muting of throttled connections.
May import: broker.config, broker.metadata, timer."""
