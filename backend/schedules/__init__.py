"""Schedules: a write-free run's frozen code, re-run on fresh data by cron."""
