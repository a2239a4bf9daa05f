"""Several gateway workers sharing one PostgreSQL (`[cluster]`): the database connection and
its schema (db.py, schema.py), leases fenced by generation (leases.py, keeper.py), the
inbound and outbound tables (queues.py: the fenced statements; tables.py: one holder's way
to them), an agent's side of them (mailbox.py) and a bot's (bots.py), wake-ups
(wakeups.py) and what `clawgate cluster` shows (status.py). Nothing here is imported
without `[cluster]`."""
