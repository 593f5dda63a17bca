"""Drive: a per-company file store with folders, sharing by the records' visibility rule, content-addressed blobs."""
