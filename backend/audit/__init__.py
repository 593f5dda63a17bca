"""The append-only, hash-chained audit trail."""
