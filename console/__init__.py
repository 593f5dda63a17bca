"""The NiceGUI console: a separate process, an HTTP client of the API."""
