"""The fairness history: the rows, statements and reads shared by both databases (`rows`), with a thin
shell per database (`sqlite`, `postgres`) holding its connection and locking.
"""
