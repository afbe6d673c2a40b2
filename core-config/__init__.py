"""cellab.epc: Open5GS / NextEPC / srsEPC configs, subscriber provisioning and the core agent."""
