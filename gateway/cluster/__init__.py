"""Several gateway workers sharing one PostgreSQL (`[cluster]`): the database connection and
its schema (db.py, schema.py), leases fenced by generation (leases.py, keeper.py), the
inbound and outbound tables (queues.py) and what `clawgate cluster` shows (status.py).
Nothing here is imported without `[cluster]`."""
