"""Business records: twelve datasets, one visibility rule."""
