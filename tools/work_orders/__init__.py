"""Work orders: the idempotent generator tool, its SQLite store and the signed outbox to the MES."""
