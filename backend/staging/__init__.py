"""Staging: what a run gets — Drive files converted to text and record exports, bundled with a manifest."""
