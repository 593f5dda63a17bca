"""Credits: the company pool, charges per run from measured resources, usage for charts."""
