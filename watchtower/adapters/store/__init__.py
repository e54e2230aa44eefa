"""The alert state store: one SQL store (`sql`: its statements and logic) with a thin shell per database,
SQLite (`sqlite`) or PostgreSQL (`postgres`); its schema as numbered migrations (`migrations`), the rows it
keeps (`rows`) and the URL that names it (`url`).

Nothing is imported here: the PostgreSQL client is loaded only by the store that needs it.
"""
