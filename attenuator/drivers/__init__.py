"""One module per attenuator backend; each registers itself with `cellab.attenuator.driver.register`."""
