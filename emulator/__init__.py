"""cellab.emulator: the virtual LTE cell (C program cellab-cell) and the virtual-lab topology."""
