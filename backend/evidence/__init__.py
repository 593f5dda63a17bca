"""A run's evidence pack: its story and the audit entries that prove it, without record or output contents."""
