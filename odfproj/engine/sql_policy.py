"""What a manifest's SQL may use: an allowlist of Spark functions, plan nodes and function options.

A query comes from whoever wrote the pull request, and Spark evaluates some of it while it merely
*analyses* the query: ``schema_of_xml('<a/>', map('rowValidationXSDPath', 'x.xsd'))`` is constant-folded
during analysis and reads the XSD (whose external entities and ``xs:include`` read more files and fetch
URLs). A deny-list of known-bad functions cannot keep up with every Spark release, so the check here
works the other way round: the query's *parsed, unresolved* plan (Spark's ``toJSON`` of it, taken before
any analysis) may contain only

- plan and expression nodes named in :data:`ALLOWED_NODES` (the SQL syntax of queries: projections,
  joins, aggregation, windows, CTEs, subqueries, ``CASE``, ``CAST``, operators...);
- functions named in :data:`ALLOWED_FUNCTIONS`: Spark's deterministic, side-effect-free builtins (math,
  string, date/time, conditional, aggregate, window, array/map/struct, hashing, JSON/CSV/XML parsing);
- relations that are one plain name (the query's inputs and earlier steps), never ``format.`path```;
- for the functions that take an options map, a literal ``map(...)`` whose keys are in
  :data:`ALLOWED_OPTIONS`: formatting and parsing options only, never one that names a file or URL.

Anything else is refused with the function or option named. New Spark functions are refused until
someone adds them here. After analysis, ``engine.spark.check_query_plan`` still checks determinism.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from odfproj.engine.errors import InvalidQueryError

__all__ = [
    "ALLOWED_FUNCTIONS",
    "ALLOWED_NODES",
    "ALLOWED_OPTIONS",
    "ALLOWED_TABLE_FUNCTIONS",
    "GIS_FUNCTIONS",
    "GIS_FUNCTION_NAMES",
    "check_parsed_query",
    "is_gis_name",
    "unknown_gis_function",
]


def _words(*texts: str) -> frozenset[str]:
    return frozenset(" ".join(texts).split())


_MATH = """
    abs acos acosh asin asinh atan atan2 atanh bin bround cbrt ceil ceiling conv cos cosh cot csc degrees
    div e exp expm1 factorial floor greatest hex hypot least ln log log10 log1p log2 mod negative pi pmod
    positive pow power radians rint round sec sign signum sin sinh sqrt tan tanh try_add try_divide try_mod
    try_multiply try_subtract unhex width_bucket
"""
_AGGREGATE = """
    any approx_count_distinct approx_percentile array_agg avg bit_and bit_or bit_xor bitmap_construct_agg
    bitmap_or_agg bool_and bool_or collect_list collect_set corr count count_if count_min_sketch covar_pop
    covar_samp every grouping grouping_id histogram_numeric hll_sketch_agg hll_union_agg kurtosis listagg
    max max_by mean median min min_by mode percentile percentile_approx percentile_cont percentile_disc
    regr_avgx regr_avgy regr_count regr_intercept regr_r2 regr_slope regr_sxx regr_sxy regr_syy skewness
    some std stddev stddev_pop stddev_samp string_agg sum try_avg try_sum var_pop var_samp variance
"""
_WINDOW = "cume_dist dense_rank lag lead nth_value ntile percent_rank rank row_number"
_GENERATOR = "explode explode_outer inline inline_outer posexplode posexplode_outer stack"
_DATETIME = """
    add_months convert_timezone date_add date_diff date_format date_from_unix_date date_part date_sub
    date_trunc dateadd datediff datepart day dayname dayofmonth dayofweek dayofyear extract from_unixtime
    from_utc_timestamp hour last_day make_date make_dt_interval make_interval make_timestamp
    make_timestamp_ltz make_timestamp_ntz make_ym_interval minute month monthname months_between next_day
    quarter second session_window timestamp_micros timestamp_millis timestamp_seconds timestampadd
    timestampdiff to_date to_timestamp to_timestamp_ltz to_timestamp_ntz to_unix_timestamp to_utc_timestamp
    trunc try_make_interval try_make_timestamp try_make_timestamp_ltz try_make_timestamp_ntz
    try_to_timestamp unix_date unix_micros unix_millis unix_seconds unix_timestamp weekday weekofyear
    window window_time year
"""
_STRING = """
    ascii base64 bit_length btrim char char_length character_length chr collate collation concat_ws
    contains decode elt encode endswith find_in_set format_number format_string initcap instr
    is_valid_utf8 lcase left len length levenshtein locate lower lpad ltrim luhn_check make_valid_utf8 mask
    octet_length overlay position printf regexp_count regexp_extract regexp_extract_all regexp_instr
    regexp_replace regexp_substr repeat replace right rpad rtrim sentences soundex space split split_part
    startswith substr substring substring_index to_binary to_char to_number to_varchar translate trim
    try_to_binary try_to_number try_validate_utf8 ucase unbase64 upper validate_utf8
"""
_COLLECTIONS = """
    array array_append array_compact array_contains array_distinct array_except array_insert
    array_intersect array_join array_max array_min array_position array_prepend array_remove array_repeat
    array_size array_union arrays_overlap arrays_zip flatten get sequence slice sort_array
    map map_concat map_contains_key map_entries map_from_arrays map_from_entries map_keys map_values
    str_to_map named_struct struct cardinality concat element_at reverse size try_element_at
    aggregate array_sort exists filter forall map_filter map_zip_with reduce transform transform_keys
    transform_values zip_with
"""
_PREDICATE_CONDITIONAL = """
    equal_null ilike in isnan isnotnull isnull like not regexp regexp_like rlike
    between coalesce if ifnull nanvl nullif nullifzero nvl nvl2 when zeroifnull
"""
_BITWISE_CONVERSION = """
    bit_count bit_get getbit shiftleft shiftright shiftrightunsigned
    bigint binary boolean cast date decimal double float int smallint string timestamp tinyint try_cast
"""
_HASH_MISC = """
    crc32 hash md5 sha sha1 sha2 xxhash64
    assert_true raise_error typeof bitmap_bit_position bitmap_bucket_number bitmap_count
    hll_sketch_estimate hll_union
"""
_SEMI_STRUCTURED = """
    from_json get_json_object json_array_length json_object_keys json_tuple schema_of_json to_json
    from_csv schema_of_csv to_csv from_xml schema_of_xml to_xml
    parse_url try_parse_url try_url_decode url_decode url_encode
    is_variant_null parse_json schema_of_variant schema_of_variant_agg to_variant_object try_parse_json
    try_variant_get variant_get
"""

#: Apache Sedona's geometry functions (``engine.gis`` loads them into the JVM when a query names one):
#: those of Sedona 1.5.1, the version kamu's Spark engine ships, as its Python API lists them, that
#: compute on their arguments only. Each was checked for files and the network: ``ST_Transform`` looks
#: CRS codes up in the EPSG database packed inside the GeoTools jar, ``ST_H3*`` run H3's bundled
#: native code. Left out: ``ST_GeomFromGML`` and ``ST_GeomFromKML`` (XML parsers, whose external
#: entities can read files and fetch URLs), the aggregates (``ST_Union_Aggr``, ``ST_Envelope_Aggr``,
#: ``ST_Intersection_Aggr``: user-defined aggregates of one session, not functions of the registry),
#: ``ST_SubDivideExplode`` (a generator) and every raster (``RS_*``) function: no ODF read step gives
#: a raster, and some of them read one from a path.
GIS_FUNCTION_NAMES: frozenset[str] = _words(
    # constructors
    """
    ST_GeomFromEWKT ST_GeomFromGeoHash ST_GeomFromGeoJSON ST_GeomFromText ST_GeomFromWKB ST_GeomFromWKT
    ST_LineFromText ST_LineStringFromText ST_MLineFromText ST_MPolyFromText ST_MakePoint ST_Point
    ST_PointFromText ST_PointZ ST_PolygonFromEnvelope ST_PolygonFromText
    """,
    # predicates
    """
    ST_Contains ST_CoveredBy ST_Covers ST_Crosses ST_Disjoint ST_DWithin ST_Equals ST_Intersects
    ST_OrderingEquals ST_Overlaps ST_Touches ST_Within
    """,
    # accessors and measurements
    """
    ST_3DDistance ST_Angle ST_Area ST_AreaSpheroid ST_Azimuth ST_Boundary ST_ClosestPoint ST_CoordDim
    ST_Degrees ST_Dimension ST_Distance ST_DistanceSphere ST_DistanceSpheroid ST_Dump ST_DumpPoints
    ST_EndPoint ST_ExteriorRing ST_FrechetDistance ST_GeometryN ST_GeometryType ST_HausdorffDistance
    ST_InteriorRingN ST_IsClosed ST_IsCollection ST_IsEmpty ST_IsRing ST_IsSimple ST_IsValid
    ST_IsValidReason ST_Length ST_LengthSpheroid ST_NDims ST_NPoints ST_NRings ST_NumGeometries
    ST_NumInteriorRings ST_NumPoints ST_PointN ST_SRID ST_StartPoint ST_X ST_XMax ST_XMin ST_Y ST_YMax
    ST_YMin ST_Z ST_ZMax ST_ZMin
    """,
    # processing, editing and overlays
    """
    ST_AddPoint ST_Affine ST_BoundingDiagonal ST_Buffer ST_BuildArea ST_Centroid ST_Collect
    ST_CollectionExtract ST_ConcaveHull ST_ConvexHull ST_Difference ST_Envelope ST_FlipCoordinates
    ST_Force3D ST_Force_2D ST_GeometricMedian ST_Intersection ST_LineFromMultiPoint
    ST_LineInterpolatePoint ST_LineLocatePoint ST_LineMerge ST_LineSubstring ST_MakeLine ST_MakePolygon
    ST_MakeValid ST_MinimumBoundingCircle ST_MinimumBoundingRadius ST_Multi ST_Normalize
    ST_PointOnSurface ST_Polygon ST_ReducePrecision ST_RemovePoint ST_Reverse ST_SetPoint ST_SetSRID
    ST_SimplifyPreserveTopology ST_Split ST_SubDivide ST_SymDifference ST_Transform ST_Translate
    ST_Union ST_VoronoiPolygons
    """,
    # output and indexing
    """
    ST_AsBinary ST_AsEWKB ST_AsEWKT ST_AsGeoJSON ST_AsGML ST_AsKML ST_AsText ST_GeoHash
    ST_H3CellDistance ST_H3CellIDs ST_H3KRing ST_H3ToGeom ST_S2CellIDs
    """,
)

#: The same, lower case, as Spark compares function names.
GIS_FUNCTIONS: frozenset[str] = frozenset(name.lower() for name in GIS_FUNCTION_NAMES)

#: Spark builtins a query may call. Left out on purpose: the clock and the session (``current_*``,
#: ``now``, ``localtimestamp``, ``current_user``, ``version``), randomness (``rand``, ``uuid``,
#: ``shuffle``, ``randstr``, ``uniform``, ``aes_encrypt``), order-dependent picks (``first``, ``last``,
#: ``any_value``), the JVM and files (``reflect``, ``java_method``, ``input_file_*``, ``xpath*``,
#: ``from_protobuf``/``to_protobuf`` (descriptor files), Avro (schema URLs)), and the physical layout
#: (``spark_partition_id``, ``monotonically_increasing_id``).
ALLOWED_FUNCTIONS: frozenset[str] = (
    _words(
        _MATH,
        _AGGREGATE,
        _WINDOW,
        _GENERATOR,
        _DATETIME,
        _STRING,
        _COLLECTIONS,
        _PREDICATE_CONDITIONAL,
        _BITWISE_CONVERSION,
        _HASH_MISC,
        _SEMI_STRUCTURED,
    )
    | GIS_FUNCTIONS
)

#: Table-valued functions a query may read from (``FROM range(10)``, ``FROM explode(...)``).
ALLOWED_TABLE_FUNCTIONS: frozenset[str] = _words(
    _GENERATOR, "range json_tuple variant_explode variant_explode_outer"
)

#: Parsed-plan node classes (simple names) the SQL of a query produces. ``Sample`` (TABLESAMPLE, random),
#: ``ScriptTransformation`` (TRANSFORM ... USING, a shell) and ``*WithUnresolvedIdentifier``
#: (``IDENTIFIER('reflect')``: a name chosen only during analysis) are among those left out.
ALLOWED_NODES: frozenset[str] = _words(
    """
    Project Filter Aggregate Join Union Intersect Except Distinct Deduplicate Sort GlobalLimit LocalLimit
    Offset Tail SubqueryAlias UnresolvedRelation OneRowRelation LocalRelation UnresolvedInlineTable
    UnresolvedWith Generate Pivot Unpivot WithWindowDefinition UnresolvedHaving RepartitionByExpression
    UnresolvedSubqueryColumnAliases UnresolvedTVFAliases UnresolvedTableValuedFunction LateralJoin
    UnresolvedHint
    Alias UnresolvedAlias MultiAlias UnresolvedAttribute UnresolvedStar UnresolvedStarExcept UnresolvedRegex
    UnresolvedExtractValue UnresolvedFunction UnresolvedGenerator UnresolvedOrdinal AttributeReference
    Literal Cast CaseWhen If In InSubquery ListQuery ScalarSubquery Exists LateralSubquery
    Not And Or EqualTo EqualNullSafe GreaterThan GreaterThanOrEqual LessThan LessThanOrEqual
    Add Subtract Multiply Divide Remainder IntegralDivide Pmod UnaryMinus UnaryPositive Abs
    BitwiseAnd BitwiseOr BitwiseXor BitwiseNot ShiftLeft ShiftRight ShiftRightUnsigned Concat
    Like ILike RLike LikeAll NotLikeAll LikeAny NotLikeAny IsNull IsNotNull IsUnknown IsNotUnknown
    SortOrder WindowExpression WindowSpecDefinition WindowSpecReference UnresolvedWindowExpression
    SpecifiedWindowFrame UnspecifiedFrame$ CurrentRow$ UnboundedPreceding$ UnboundedFollowing$
    LambdaFunction UnresolvedNamedLambdaVariable NamedLambdaVariable CreateNamedStruct CreateStruct
    GroupingSets Cube Rollup TimestampAdd TimestampDiff Collate
    """
)

#: Functions that take an options map, by the position of that map among their arguments.
OPTION_ARGUMENT: Mapping[str, int] = MappingProxyType(
    {
        "from_json": 2,
        "from_csv": 2,
        "from_xml": 2,
        "schema_of_json": 1,
        "schema_of_csv": 1,
        "schema_of_xml": 1,
        "to_json": 1,
        "to_csv": 1,
        "to_xml": 1,
    }
)

#: Options (lower case, as Spark compares them) that only say how text is parsed or written. None names
#: a file, a folder or a URL: ``rowValidationXSDPath`` and every other path-like option are refused.
ALLOWED_OPTIONS: frozenset[str] = _words(
    """
    mode dateformat timestampformat timestampntzformat timezone locale encoding charset linesep
    columnnameofcorruptrecord enabledatetimeparsingfallback prefersdecimal infertimestamp
    allownumericleadingzeros allowcomments allowunquotedfieldnames allowsinglequotes
    allowbackslashescapingallcharacters allownonnumericnumbers allowunquotedcontrolchars
    primitivesasstring dropfieldifallnull ignorenullfields pretty multiline
    sep delimiter quote escape comment header nullvalue nanvalue positiveinf negativeinf emptyvalue
    ignoreleadingwhitespace ignoretrailingwhitespace inferschema enforceschema maxcolumns
    maxcharspercolumn unescapedquotehandling quoteall escapequotes chartoescapequoteescaping
    rowtag roottag attributeprefix valuetag excludeattribute ignoresurroundingspaces ignorenamespace
    wildcardcolname declaration arrayelementname samplingratio
    """
)


@dataclass(frozen=True)
class _Node:
    """One node of a parsed plan: its class's simple name, its JSON fields and its children."""

    kind: str
    fields: Mapping[str, Any]
    children: tuple[_Node, ...]


def check_parsed_query(plan_json: str, where: str) -> None:
    """Refuse a parsed (unresolved) plan, given as Spark's ``toJSON``, that leaves the allowlists.

    Raises ``InvalidQueryError`` naming ``where``, the function, node or option, and why.
    """
    for node in _nodes(json.loads(plan_json)):
        reason = _refusal(node)
        if reason is not None:
            raise InvalidQueryError(f"{where}: {reason}")


def _refusal(node: _Node) -> str | None:
    if node.kind not in ALLOWED_NODES:
        return (
            f"{_describe(node.kind)} is not allowed in an ODF query (odfproj accepts only plain queries over "
            "the inputs with deterministic, side-effect-free functions)"
        )
    if node.kind == "UnresolvedFunction":
        return _function_refusal(node)
    if node.kind == "UnresolvedGenerator":
        name = str((node.fields.get("name") or {}).get("funcName", "")).lower()
        return None if name in ALLOWED_FUNCTIONS else _not_allowed(name)
    if node.kind == "UnresolvedTableValuedFunction":
        parts = _name_parts(node.fields.get("name"))
        name = parts[-1].lower() if parts else ""
        if len(parts) != 1 or name not in ALLOWED_TABLE_FUNCTIONS:
            return f"table function {'.'.join(parts)} is not allowed (allowed: range and the generators)"
    if node.kind == "UnresolvedRelation":
        parts = _name_parts(node.fields.get("multipartIdentifier"))
        if len(parts) != 1:
            return (
                f"relation {'.'.join(parts)} is not allowed: a query reads only its inputs and earlier "
                "steps by their plain names (never a file, a format or another catalog)"
            )
        if node.fields.get("options") not in (None, {}, []):
            return f"options on relation {parts[0]} are not allowed"
    return None


def _function_refusal(node: _Node) -> str | None:
    parts = _name_parts(node.fields.get("nameParts"))
    name = parts[-1].lower() if parts else ""
    if any(p.lower() not in ("system", "builtin") for p in parts[:-1]) or name not in ALLOWED_FUNCTIONS:
        return _not_allowed(".".join(parts))
    position = OPTION_ARGUMENT.get(name)
    arguments = [node.children[i] for i in node.fields.get("arguments", [])]
    if position is None or len(arguments) <= position:
        return None
    return _options_refusal(name, arguments[position])


def _options_refusal(function: str, options: _Node) -> str | None:
    """The options map of ``function`` must be ``map('key', 'value', ...)`` with allowed keys only."""
    literal_map = (
        options.kind == "UnresolvedFunction"
        and [p.lower() for p in _name_parts(options.fields.get("nameParts"))] == ["map"]
        and all(c.kind == "Literal" and c.fields.get("dataType") == "string" for c in options.children)
    )
    if not literal_map:
        return f"the options of {function} must be a literal map('key', 'value', ...) so that they can be checked"
    keys = [str(c.fields.get("value")) for c in options.children[0::2]]
    for key in keys:
        if key.lower() not in ALLOWED_OPTIONS:
            return (
                f"option {key!r} of {function} is not allowed (only parsing and formatting options; "
                "nothing that names a file, folder or URL)"
            )
    return None


def _not_allowed(name: str) -> str:
    why = _WHY_LEFT_OUT.get(name.rsplit(".", 1)[-1].lower())
    if why is not None:
        return f"function {name} is not allowed because {why}; ODF queries must be deterministic and pure"
    if is_gis_name(name):
        return unknown_gis_function(name)
    return (
        f"function {name} is not on odfproj's allowlist of deterministic, side-effect-free Spark builtins "
        "(see docs/guide/manifests.md, 'SQL a query may use')"
    )


def is_gis_name(name: str) -> bool:
    """Whether ``name`` is spelt as a Sedona function (``ST_...``, ``RS_...``), known or not."""
    return name.lower().startswith(("st_", "rs_"))


def unknown_gis_function(name: str) -> str:
    """Why ``name``, spelt as a GIS function, is refused: with the allowed name it is closest to, if any."""
    import difflib

    by_lower = {n.lower(): n for n in GIS_FUNCTION_NAMES}
    close = difflib.get_close_matches(name.lower(), by_lower, n=1, cutoff=0.8)
    hint = f" (did you mean {by_lower[close[0]]}?)" if close else ""
    return (
        f"function {name} is not one of the Apache Sedona GIS functions odfproj allows{hint} "
        "(see docs/guide/engines.md, 'GIS functions')"
    )


def _reasons(reason: str, names: str) -> dict[str, str]:
    return dict.fromkeys(names.split(), reason)


#: Why well-known builtins are left out of :data:`ALLOWED_FUNCTIONS`, for a message that helps.
_WHY_LEFT_OUT: Mapping[str, str] = MappingProxyType(
    {
        **_reasons(
            "it is not deterministic",
            "rand randn random uuid shuffle randstr uniform aes_encrypt first first_value last last_value "
            "any_value",
        ),
        **_reasons(
            "it reads the clock or the session, not the data",
            "current_timestamp now current_date curdate localtimestamp current_timezone current_user user "
            "session_user current_catalog current_database current_schema version",
        ),
        **_reasons("it calls into the JVM", "reflect java_method try_reflect"),
        **_reasons(
            "it depends on where and how the data is stored",
            "input_file_name input_file_block_start input_file_block_length spark_partition_id "
            "monotonically_increasing_id",
        ),
        **_reasons(
            "it can read files or fetch URLs",
            "xpath xpath_boolean xpath_double xpath_float xpath_int xpath_long xpath_number xpath_short "
            "xpath_string from_protobuf to_protobuf from_avro to_avro schema_of_avro st_geomfromgml "
            "st_geomfromkml",
        ),
    }
)


_DESCRIPTIONS = {
    "ScriptTransformation": "TRANSFORM ... USING (an external program)",
    "Sample": "TABLESAMPLE (random)",
    "PlanWithUnresolvedIdentifier": "IDENTIFIER(...) (a name chosen at analysis)",
    "ExpressionWithUnresolvedIdentifier": "IDENTIFIER(...) (a name chosen at analysis)",
}


def _describe(kind: str) -> str:
    return _DESCRIPTIONS.get(kind, f"the SQL construct {kind.rstrip('$')}")


def _name_parts(value: Any) -> list[str]:
    """Spark writes a name's parts as ``"[a, b]"`` in its JSON; a plain string is one part."""
    if isinstance(value, list):
        return [str(v) for v in value]
    text = str(value or "")
    if text.startswith("[") and text.endswith("]"):
        text = text[1:-1]
    return text.split(", ") if text else []


def _nodes(value: Any) -> Iterator[_Node]:
    """Every node of every tree inside ``value``: Spark's JSON writes a tree as its nodes in pre-order
    (each with ``num-children``), and nests trees in fields (expressions, CTEs, subquery plans)."""
    if isinstance(value, list):
        if value and all(isinstance(v, dict) and "class" in v for v in value):
            position = 0
            while position < len(value):
                tree, position = _build(value, position)
                yield from _walk(tree)
        else:
            for item in value:
                yield from _nodes(item)
    elif isinstance(value, dict):
        if "class" in value:  # a lone node outside a pre-order list
            tree, _ = _build([value], 0)
            yield from _walk(tree)
        else:
            for item in value.values():
                yield from _nodes(item)


def _build(flat: list[dict[str, Any]], start: int) -> tuple[_Node, int]:
    fields = flat[start]
    position = start + 1
    children = []
    for _ in range(int(fields.get("num-children", 0))):
        child, position = _build(flat, position)
        children.append(child)
    kind = str(fields["class"]).rsplit(".", 1)[-1]
    return _Node(kind, fields, tuple(children)), position


def _walk(node: _Node) -> Iterator[_Node]:
    yield node
    for key, value in node.fields.items():
        if key not in ("class", "num-children"):
            yield from _nodes(value)
    for child in node.children:
        yield from _walk(child)
