"""The demo companies: Acme Analytics and Globex."""
