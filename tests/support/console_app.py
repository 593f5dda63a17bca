"""The console as the `user` fixture builds it: pages against the API configured by the test."""

from nicegui import ui

from console import pages, theme

ui.add_css(theme.CSS, shared=True)
pages.register()
ui.run(storage_secret="console tests")
