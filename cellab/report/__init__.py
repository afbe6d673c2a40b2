"""The report of a result folder: its model, sections, tables, figures, statistics and plots."""
