"""cellab.core: Open5GS / NextEPC / srsEPC configs, subscriber provisioning and the core agent (own issue)."""
