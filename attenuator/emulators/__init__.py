"""Protocol-faithful device emulators that tests (and the virtual lab) start themselves.

Each vendor module holds a device model (`handle(line) -> reply`) and the servers in `servers`
put it behind a pseudo-terminal, a TCP port, an HTTP port or a HID report pipe.
"""
