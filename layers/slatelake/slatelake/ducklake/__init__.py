"""The bridge: DuckDB + DuckLake over a materialized slatelake catalog.

Only this layer and ``maintenance`` import duckdb. The catalog is loaded into
an in-memory DuckDB database holding the ``ducklake_*`` tables, DuckLake is
attached over it unchanged, and each DuckLake transaction's effect on those
tables becomes one change set committed through the log.
"""
