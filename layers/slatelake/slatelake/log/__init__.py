"""The commit log: slots, the race for them, replay, leases and truncation.

The log is the truth; the SlateDB store is an index of it. Committers write
only slots and fence nothing. Works on raw keys and values; knows nothing
about DuckLake.
"""
