"""cellab.ue: UE agents (virtual UE; Android arrives with its own issue) and the probe (C, in probe/)."""
