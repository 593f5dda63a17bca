"""Runs: proposal → approval bound to hashes → one fresh VM → outputs in Drive."""
