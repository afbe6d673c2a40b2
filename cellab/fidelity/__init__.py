"""The virtual cell against the real stack: the same campaigns on both labs, judged per case against tolerances."""
