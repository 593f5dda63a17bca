"""People told when they are needed (issue 56 item 5): e-mail and signed webhooks for the events that wait
for someone. docs/notifications.md describes the events, the messages, the signature and the settings."""
