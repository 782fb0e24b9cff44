"""The store layer: lake locations, the SlateDB keyspace, values, handles.

The only layer that imports ``slatedb``. Knows nothing about DuckLake.
"""
