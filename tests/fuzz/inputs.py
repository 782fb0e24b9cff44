"""What the fuzz tests feed each parser: option names, Lambda events, and the
lake the CLI and index fuzz run against, with the names in it (conftest.py
builds it once per session and store).

The generic hostile text, numbers, JSON and URLs are in ``hostile``; here they
are shaped into the inputs of one parser each, mixed with the real names so
the fuzz reaches past the first check.
"""

from __future__ import annotations

import json
from pathlib import Path

from hypothesis import strategies as st

import slatelake
from tests.fuzz.hostile import (
    NASTY_STRINGS,
    PristineBucket,
    PristineFiles,
    hostile_json,
    hostile_numbers,
    hostile_text,
    hostile_urls,
)

# -- maintenance options ---------------------------------------------------------
P = "MAINTENANCE_"
PARAMS = {
    "expire_snapshots": ("dry_run", "versions", "older_than"),
    "flush_inlined_data": (),
    "merge_adjacent_files": ("max_compacted_files", "max_file_size", "min_file_size"),
    "rewrite_data_files": ("delete_threshold",),
    "cleanup_old_files": ("dry_run", "cleanup_all", "older_than"),
    "delete_orphaned_files": ("dry_run", "cleanup_all", "older_than"),
}
OWN = (
    *("INTERVAL", "SWEEP_INDEXES", "BATCH_SIZE", "COMPACT_STORE", "COMPACT_STORE_SUBSPACE"),
    *("COMPACT_STORE_TIMEOUT", "TABLE_BATCHES", "PROGRESS", "ORPHAN_AGE_FLOOR_OVERRIDE"),
)
KNOWN = (
    *(P + step.upper() for step in PARAMS),
    *(f"{P}{step}_{param}".upper() for step, params in PARAMS.items() for param in params),
    *(P + own for own in OWN),
)
_spelled = st.builds(
    lambda key, how, extra: {
        "alias": "META_" + key,
        "lower": key.lower(),
        "padded": f" {key}\t",
        "dotless": key.replace("I", "ı", 1),
        "ligature": key.replace("FL", "ﬂ", 1),
        "suffix": key + extra,
        "prefix": extra + key,
    }[how],
    st.sampled_from(KNOWN),
    st.sampled_from(("alias", "lower", "padded", "dotless", "ligature", "suffix", "prefix")),
    hostile_text,
)
option_keys = st.one_of(
    st.sampled_from(KNOWN), _spelled, hostile_text, st.sampled_from((5, None, 2**64, 1.5))
)
option_values = st.one_of(
    st.sampled_from(NASTY_STRINGS),
    hostile_text,
    hostile_numbers,
    st.booleans(),
    st.none(),
    st.lists(st.integers(), max_size=2),
)


def canonical(key: object) -> str:
    """The option a key spells, as error messages name it."""
    upper = str(key).strip(" \t\r\n").upper()
    return P + upper.removeprefix("META_" + P) if upper.startswith("META_" + P) else upper


# -- Lambda events ---------------------------------------------------------------
ROOT = Path(__file__).resolve().parents[2]
STACK_LAKE, STACK_DATA = "s3://lake-bucket/lake", "s3://lake-bucket/data/"
ENV = {"SLATELAKE_LAKE": STACK_LAKE, "SLATELAKE_DATA_PATH": STACK_DATA}
SAMPLES = [json.loads(p.read_text()) for p in sorted((ROOT / "events").glob("*.json"))]
_lakes = st.one_of(
    st.sampled_from(
        (STACK_LAKE, STACK_LAKE + "/", "s3://lake-bucket/lake/../lake", "s3://lake-bucket/Lake")
        + ("s3://lake-bucket/lakehouse", "s3://LAKE-BUCKET/lake", "s3://lake-bucket//lake")
        + ("s3://lake-bucket/la\tke", " s3://lake-bucket/lake", "s3://lake-bucket/lake?x")
    ),
    hostile_urls,
    hostile_json,
)
_datas = st.one_of(
    st.sampled_from((STACK_DATA, STACK_DATA.rstrip("/"), "s3://lake-bucket/data/x/", "", None)),
    hostile_urls,
    hostile_json,
)
_option_names = st.one_of(
    st.sampled_from(
        ("MAINTENANCE_FLUSH_INLINED_DATA", "MAINTENANCE_INTERVAL", "meta_maintenance_interval")
    )
    | st.sampled_from(
        ("subspace", "timeout", "require_completed", "live", "x\nMAINTENANCE_INTERVAL")
    ),
    hostile_text,
)
_options = st.one_of(
    st.dictionaries(
        _option_names,
        st.one_of(st.sampled_from(NASTY_STRINGS), hostile_numbers, hostile_json),
        max_size=3,
    ),
    hostile_json,
)
_fields = {
    "action": st.one_of(
        st.sampled_from(("maintenance", "compact_store", "census", "status")), hostile_json
    ),
    "trigger": st.one_of(st.sampled_from(("scheduled", "manual")), hostile_json),
    "lake": _lakes,
    "data_path": _datas,
    "options": _options,
    "wait_s": st.one_of(hostile_numbers, hostile_json),
}
_documents = st.fixed_dictionaries(
    {}, optional={**_fields, "unknown": hostile_json, "detail-type": hostile_json}
)
events = st.one_of(
    _documents,
    st.builds(
        lambda detail: {"detail-type": "Scheduled Event", "source": "aws.events", "detail": detail},
        st.one_of(_documents, hostile_json),
    ),
    st.sampled_from(SAMPLES),
    hostile_json,
)
environments = st.one_of(
    st.just(ENV),
    st.builds(
        lambda lakes, datas: {
            **ENV,
            "SLATELAKE_ALLOWED_LAKES": lakes,
            "SLATELAKE_ALLOWED_DATA_PATHS": datas,
        },
        st.one_of(st.just("s3://lake-bucket/other, memory://m"), hostile_text),
        st.one_of(st.just("s3://lake-bucket/more/"), hostile_text),
    ),
    st.just({}),
)


# -- the lake the CLI and index fuzz run against -----------------------------------
WEIRD_SCHEMA, WEIRD_TABLE = "we.ird", 't"q é'


def build_lake(url: str, data_path: str) -> None:
    """A small lake with names worth hitting: a table with Parquet and inlined
    rows and three indexes, and a schema and table whose names need quoting."""
    with slatelake.connect(url, data_path=data_path) as s:
        s.sql("CREATE TABLE t (id INTEGER, v VARCHAR, ts TIMESTAMP)")
        s.sql("INSERT INTO t SELECT i, 'v' || i, TIMESTAMP '2024-01-01' FROM range(20) r(i)")
        s.sql("INSERT INTO t VALUES (100, 'inline', NULL)")
        s.sql('CREATE SCHEMA "we.ird"')
        s.sql('CREATE TABLE "we.ird"."t""q é" (c INTEGER, "d e" VARCHAR)')
        s.sql('INSERT INTO "we.ird"."t""q é" VALUES (1, \'x\')')
        s.create_index("t", "v", name="by_v")
        s.create_index("t", "id")  # t_id_idx: a lookup value must cast to INTEGER
        s.create_index("t", "ts")  # t_ts_idx: ... and to TIMESTAMP


TABLES = ("t", "main.t", "T", "nope", f"{WEIRD_SCHEMA}.{WEIRD_TABLE}", WEIRD_TABLE, "we.ird.t")
COLUMNS = ("id", "v", "ts", "c", "d e", "ID", "nope")
INDEXES = ("by_v", "t_id_idx", "t_ts_idx", "nope", "BY_V")
Lake = PristineFiles | PristineBucket
