"""Proposed actions: what a run's actions.json asks for, decided one item at a time."""
