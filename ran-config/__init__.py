"""cellab.ran: srsRAN eNB profiles, templates, validation and the eNB agent (arrives with its own issue)."""
