"""ZeroMQ bus: controller, agents, CURVE keys, clock offsets, telemetry."""
