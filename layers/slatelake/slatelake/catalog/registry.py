"""Every ``ducklake_*`` metadata table of DuckLake 1.0, as data.

For each table: its kind byte (stable forever), its columns in DuckLake's
order, whether rows are versioned (``begin_snapshot``/``end_snapshot``), the
key columns that identify a live row, and where rows live. Versioned rows
live in ``current`` until ended; an ended row lives in ``history`` under its
key plus ``end_snapshot``. Unversioned rows live in their home subspace.

Some unversioned child tables are *grouped*: all rows sharing a parent id are
one stored value (a file's column statistics, a mapping's names). That keeps
the key count, which is what the SlateDB bindings charge for, near the
entity count. ``group`` names the key columns; ``member`` orders rows in it.

Values are Python scalars; TIMESTAMPTZ is an int of microseconds since the
epoch (UTC), UUID a ``uuid.UUID``.

String identities in keys (metadata keys, tag keys, paths) are digested to a
signed 64-bit integer: no strings in keys. A NULL key component encodes as
the minimum integer.

The extension wheel's own schema is the reference; a test compares this
registry against ``ducklake_*`` tables created by the pinned extension.
Knows no SQL.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from slatelake.store.keys import Subspace

BIGINT, VARCHAR, BOOLEAN, UUID, TIMESTAMPTZ = (
    "BIGINT",
    "VARCHAR",
    "BOOLEAN",
    "UUID",
    ("TIMESTAMP WITH TIME ZONE"),
)


@dataclass(frozen=True)
class TableSpec:
    name: str
    kind: int
    columns: tuple[tuple[str, str], ...]
    key: tuple[str, ...]
    versioned: bool = False
    home: Subspace = Subspace.CURRENT
    group: tuple[str, ...] = ()  # grouped tables: the columns all rows of one value share
    member: tuple[str, ...] = ()  # grouped tables: orders and identifies rows in a value
    digest: tuple[str, ...] = ()  # key columns stored as a digest of their text

    def __post_init__(self) -> None:
        # Precomputed: key building looks columns up once per row.
        object.__setattr__(self, "_index", {c: i for i, (c, _) in enumerate(self.columns)})

    @property
    def column_names(self) -> tuple[str, ...]:
        return tuple(c for c, _ in self.columns)

    @property
    def width(self) -> int:
        return len(self.columns)

    def index(self, column: str) -> int:
        return self._index[column]  # type: ignore[attr-defined]

    @property
    def grouped(self) -> bool:
        return bool(self.group)


def _cols(spec: str) -> tuple[tuple[str, str], ...]:
    out = []
    for part in spec.split(","):
        name, _, typ = part.strip().partition(":")
        out.append(
            (name, {"i": BIGINT, "s": VARCHAR, "b": BOOLEAN, "u": UUID, "t": TIMESTAMPTZ}[typ])
        )
    return tuple(out)


_V = "begin_snapshot:i, end_snapshot:i"

TABLES: tuple[TableSpec, ...] = (
    TableSpec(
        "ducklake_metadata",
        0x01,
        _cols("key:s, value:s, scope:s, scope_id:i"),
        key=("key", "scope", "scope_id"),
        digest=("key", "scope"),
    ),
    TableSpec(
        "ducklake_snapshot",
        0x02,
        _cols(
            "snapshot_id:i, snapshot_time:t, schema_version:i, next_catalog_id:i, next_file_id:i"
        ),
        key=("snapshot_id",),
        home=Subspace.SNAPSHOT,
    ),
    TableSpec(
        "ducklake_snapshot_changes",
        0x03,
        _cols("snapshot_id:i, changes_made:s, author:s, commit_message:s, commit_extra_info:s"),
        key=("snapshot_id",),
        home=Subspace.SNAPSHOT,
    ),
    TableSpec(
        "ducklake_schema",
        0x04,
        _cols(f"schema_id:i, schema_uuid:u, {_V}, schema_name:s, path:s, path_is_relative:b"),
        key=("schema_id",),
        versioned=True,
    ),
    TableSpec(
        "ducklake_table",
        0x05,
        _cols(
            f"table_id:i, table_uuid:u, {_V}, schema_id:i, table_name:s, path:s, path_is_relative:b"
        ),
        key=("table_id",),
        versioned=True,
    ),
    TableSpec(
        "ducklake_view",
        0x06,
        _cols(
            f"view_id:i, view_uuid:u, {_V}, schema_id:i, view_name:s, dialect:s, sql:s, "
            "column_aliases:s"
        ),
        key=("view_id",),
        versioned=True,
    ),
    TableSpec(
        "ducklake_tag",
        0x07,
        _cols(f"object_id:i, {_V}, key:s, value:s"),
        key=("object_id", "key"),
        versioned=True,
        digest=("key",),
    ),
    TableSpec(
        "ducklake_column_tag",
        0x08,
        _cols(f"table_id:i, column_id:i, {_V}, key:s, value:s"),
        key=("table_id", "column_id", "key"),
        versioned=True,
        digest=("key",),
    ),
    TableSpec(
        "ducklake_data_file",
        0x09,
        _cols(
            f"data_file_id:i, table_id:i, {_V}, file_order:i, path:s, path_is_relative:b, "
            "file_format:s, record_count:i, file_size_bytes:i, footer_size:i, row_id_start:i, "
            "partition_id:i, encryption_key:s, mapping_id:i, partial_max:i"
        ),
        key=("data_file_id",),
        versioned=True,
    ),
    TableSpec(
        "ducklake_file_column_stats",
        0x0A,
        _cols(
            "data_file_id:i, table_id:i, column_id:i, column_size_bytes:i, value_count:i, "
            "null_count:i, min_value:s, max_value:s, contains_nan:b, extra_stats:s"
        ),
        key=("data_file_id",),
        group=("data_file_id",),
        member=("column_id",),
    ),
    TableSpec(
        "ducklake_delete_file",
        0x0B,
        _cols(
            f"delete_file_id:i, table_id:i, {_V}, data_file_id:i, path:s, path_is_relative:b, "
            "format:s, delete_count:i, file_size_bytes:i, footer_size:i, encryption_key:s, "
            "partial_max:i"
        ),
        key=("delete_file_id",),
        versioned=True,
    ),
    TableSpec(
        "ducklake_column",
        0x0C,
        _cols(
            f"column_id:i, {_V}, table_id:i, column_order:i, column_name:s, column_type:s, "
            "initial_default:s, default_value:s, nulls_allowed:b, parent_column:i, "
            "default_value_type:s, default_value_dialect:s"
        ),
        key=("table_id", "column_id"),
        versioned=True,
    ),
    TableSpec(
        "ducklake_inlined_data_tables",
        0x0D,
        _cols("table_id:i, table_name:s, schema_version:i"),
        key=("table_id", "schema_version"),
    ),
    TableSpec(
        "ducklake_partition_info",
        0x0E,
        _cols(f"partition_id:i, table_id:i, {_V}"),
        key=("table_id", "partition_id"),
        versioned=True,
    ),
    TableSpec(
        "ducklake_partition_column",
        0x0F,
        _cols("partition_id:i, table_id:i, partition_key_index:i, column_id:i, transform:s"),
        key=("table_id", "partition_id"),
        group=("table_id", "partition_id"),
        member=("partition_key_index",),
    ),
    TableSpec(
        "ducklake_file_partition_value",
        0x10,
        _cols("data_file_id:i, table_id:i, partition_key_index:i, partition_value:s"),
        key=("data_file_id",),
        group=("data_file_id",),
        member=("partition_key_index",),
    ),
    TableSpec(
        "ducklake_files_scheduled_for_deletion",
        0x11,
        _cols("data_file_id:i, path:s, path_is_relative:b, schedule_start:t"),
        key=("data_file_id", "path"),
        digest=("path",),
    ),
    TableSpec(
        "ducklake_column_mapping",
        0x12,
        _cols("mapping_id:i, table_id:i, type:s"),
        key=("mapping_id",),
    ),
    TableSpec(
        "ducklake_name_mapping",
        0x13,
        _cols(
            "mapping_id:i, column_id:i, source_name:s, target_field_id:i, parent_column:i, "
            "is_partition:b"
        ),
        key=("mapping_id",),
        group=("mapping_id",),
        member=("column_id",),
    ),
    TableSpec(
        "ducklake_table_stats",
        0x14,
        _cols("table_id:i, record_count:i, next_row_id:i, file_size_bytes:i"),
        key=("table_id",),
    ),
    TableSpec(
        "ducklake_table_column_stats",
        0x15,
        _cols(
            "table_id:i, column_id:i, contains_null:b, contains_nan:b, min_value:s, max_value:s, "
            "extra_stats:s"
        ),
        key=("table_id", "column_id"),
    ),
    TableSpec(
        "ducklake_schema_versions",
        0x16,
        _cols("begin_snapshot:i, schema_version:i, table_id:i"),
        key=("begin_snapshot", "table_id"),
    ),
    TableSpec(
        "ducklake_sort_info",
        0x17,
        _cols(f"sort_id:i, table_id:i, {_V}"),
        key=("table_id", "sort_id"),
        versioned=True,
    ),
    TableSpec(
        "ducklake_sort_expression",
        0x18,
        _cols(
            "sort_id:i, table_id:i, sort_key_index:i, expression:s, dialect:s, sort_direction:s, "
            "null_order:s"
        ),
        key=("table_id", "sort_id"),
        group=("table_id", "sort_id"),
        member=("sort_key_index",),
    ),
    TableSpec(
        "ducklake_macro",
        0x19,
        _cols(f"schema_id:i, macro_id:i, macro_name:s, {_V}"),
        key=("macro_id",),
        versioned=True,
    ),
    TableSpec(
        "ducklake_macro_impl",
        0x1A,
        _cols("macro_id:i, impl_id:i, dialect:s, sql:s, type:s"),
        key=("macro_id", "impl_id"),
    ),
    TableSpec(
        "ducklake_macro_parameters",
        0x1B,
        _cols(
            "macro_id:i, impl_id:i, column_id:i, parameter_name:s, parameter_type:s, "
            "default_value:s, default_value_type:s"
        ),
        key=("macro_id", "impl_id", "column_id"),
    ),
    TableSpec(
        "ducklake_file_variant_stats",
        0x1C,
        _cols(
            "data_file_id:i, table_id:i, column_id:i, variant_path:s, shredded_type:s, "
            "column_size_bytes:i, value_count:i, null_count:i, min_value:s, max_value:s, "
            "contains_nan:b, extra_stats:s"
        ),
        key=("data_file_id",),
        group=("data_file_id",),
        member=("column_id", "variant_path"),
    ),
)

# slatelake's own catalog records, stored and versioned like DuckLake rows but
# never loaded into DuckDB (DuckLake does not know them). An equality index's
# definition: ids from DuckLake's next_catalog_id counter, so never reused.
INDEX_DEF = TableSpec(
    "slatelake_index",
    0x30,
    _cols(f"index_id:i, table_id:i, column_id:i, {_V}, index_name:s, index_kind:i"),
    key=("index_id",),
    versioned=True,
)
OWN_TABLES: tuple[TableSpec, ...] = (INDEX_DEF,)

BY_NAME: dict[str, TableSpec] = {t.name: t for t in (*TABLES, *OWN_TABLES)}
BY_KIND: dict[int, TableSpec] = {t.kind: t for t in (*TABLES, *OWN_TABLES)}

# Tables DuckLake creates on the fly with the user's column types:
#   ducklake_inlined_data_<table_id>_<schema_version>  (row_id, begin_snapshot, end_snapshot, ...)
#   ducklake_inlined_delete_<table_id>                 (file_id, row_id, begin_snapshot)
# Rows and each table's DDL live in `inline`, keyed by the ids in the name plus
# the columns that identify a row: an UPDATE keeps the row_id, so inlined data
# rows are (row_id, begin_snapshot); inlined deletes are (file_id, row_id).
INLINE_ROW_KIND = 0x40
INLINE_DDL_KIND = 0x41
INLINE_DELETE_ROW_KIND = 0x42
INLINE_DELETE_DDL_KIND = 0x43


@dataclass(frozen=True)
class InlineTable:
    name: str
    row_kind: int
    ddl_kind: int
    ids: tuple[int, ...]
    identity: tuple[int, ...]  # column positions that identify a row


@dataclass(frozen=True)
class _InlineShape:
    pattern: re.Pattern[str]
    template: str
    row_kind: int
    ddl_kind: int
    identity: tuple[int, ...]


_INLINE_SHAPES = (
    _InlineShape(
        re.compile(r"^ducklake_inlined_data_(\d+)_(\d+)$"),
        "ducklake_inlined_data_{}_{}",
        INLINE_ROW_KIND,
        INLINE_DDL_KIND,
        (0, 1),  # (row_id, begin_snapshot)
    ),
    _InlineShape(
        re.compile(r"^ducklake_inlined_delete_(\d+)$"),
        "ducklake_inlined_delete_{}",
        INLINE_DELETE_ROW_KIND,
        INLINE_DELETE_DDL_KIND,
        (0, 1),  # (file_id, row_id)
    ),
)
INLINE_ROW_KINDS = frozenset(s.row_kind for s in _INLINE_SHAPES)
INLINE_DDL_KINDS = frozenset(s.ddl_kind for s in _INLINE_SHAPES)


def inline_table(name: str) -> InlineTable | None:
    """The on-the-fly table a name denotes, or None for any other name."""
    for shape in _INLINE_SHAPES:
        m = shape.pattern.match(name)
        if m:
            ids = tuple(int(g) for g in m.groups())
            return InlineTable(name, shape.row_kind, shape.ddl_kind, ids, shape.identity)
    return None


def inline_table_of(kind: int, components: tuple[int, ...]) -> InlineTable | None:
    """The on-the-fly table a stored row or DDL key belongs to."""
    for shape in _INLINE_SHAPES:
        if kind in (shape.row_kind, shape.ddl_kind):
            count = shape.template.count("{}")
            if len(components) < count:
                return None
            return inline_table(shape.template.format(*components[:count]))
    return None


def spec(name: str) -> TableSpec:
    try:
        return BY_NAME[name]
    except KeyError:
        raise KeyError(f"{name!r} is not a DuckLake 1.0 metadata table") from None
