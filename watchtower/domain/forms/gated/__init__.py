"""The gated form: pods held by scheduling gates are waiting work, attributed to the system that holds them."""
