"""DuckLake catalog state on the store: the rows of the ``ducklake_*`` tables.

Head, change sets built from row changes, materialization (store view plus
log replay) and the folder. Never imports duckdb.
"""
