"""A lab's parts: inventories of hosts, agents and devices, the lab they make, its attenuator, agent installs and health checks."""
