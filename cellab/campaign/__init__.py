"""A campaign: its model, run parameters, rules and checks, the schema reference, and the readers of every file it names."""
