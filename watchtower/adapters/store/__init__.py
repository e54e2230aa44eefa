"""The alert state store in SQLite (`sqlite`) or PostgreSQL (`postgres`), its schema as numbered migrations
(`migrations`), the rows it keeps (`rows`) and the URL that names it (`url`).

Nothing is imported here: the PostgreSQL client is loaded only by the store that needs it.
"""
