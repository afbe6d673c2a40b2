"""cellab.attenuator: attenuator drivers, device emulators, schedules, player, calibration, mobility replay."""
