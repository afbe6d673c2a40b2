"""cellab.server: BPF congestion-control modules, their loader, the traffic sender and the server agent."""
