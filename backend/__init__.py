"""Cleanroom: approved Python runs on a company's private data, in fresh VMs with no network."""
