"""A few words on what a metadata block did: the ``odfproj log`` view of an event.

Pure: an event in, a line out, so every front end (``log``, ``watch``, a future ``show``) says the same.
"""

from __future__ import annotations

from odfproj.errors import OdfprojError
from odfproj.odf import model
from odfproj.odf.odf_schema import arrow_schema_of
from odfproj.odf.timestamps import format_rfc3339

__all__ = ["summarize"]


def _tag(value: object) -> str:
    return model.VARIANT_OF[type(value)][1]


def _data_summary(event: model.AddData | model.ExecuteTransform) -> list[str]:
    parts = []
    if event.new_data is not None:
        interval = event.new_data.offset_interval
        parts.append(f"records {interval.start}..{interval.end} ({interval.end - interval.start + 1})")
    else:
        parts.append("no new data")
    if event.new_watermark is not None:
        parts.append(f"watermark {format_rfc3339(event.new_watermark)}")
    if event.new_checkpoint is not None:
        parts.append(f"checkpoint {event.new_checkpoint.physical_hash.short()}")
    return parts


def _read_and_merge(read: object, merge: object) -> str:
    return f"read {_tag(read)}, merge {_tag(merge)}"


def summarize(event: model.MetadataEvent) -> str:
    """A few words on what a block did, for ``log``; the full event is one ``block decode`` away."""
    match event:
        case model.Seed():
            return f"{event.dataset_kind.name} dataset {event.dataset_id}"
        case model.AddData():
            parts = _data_summary(event)
            if event.new_source_state is not None:
                parts.append(f"source state {event.new_source_state.kind}")
            return ", ".join(parts)
        case model.ExecuteTransform():
            return ", ".join([*_data_summary(event), f"{len(event.query_inputs)} input(s)"])
        case model.SetDataSchema():
            try:
                names = arrow_schema_of(event).names
            except OdfprojError:
                return "invalid Arrow schema"
            return f"{len(names)} columns: {', '.join(names)}"
        case model.SetInfo():
            keywords = f" [{', '.join(event.keywords)}]" if event.keywords else ""
            return f"{event.description or ''}{keywords}".strip()
        case model.SetLicense():
            return event.short_name
        case model.SetPollingSource():
            return f"fetch {_tag(event.fetch)}, {_read_and_merge(event.read, event.merge)}"
        case model.AddPushSource():
            return f"source {event.source_name!r}: {_read_and_merge(event.read, event.merge)}"
        case model.DisablePushSource():
            return f"source {event.source_name!r}"
        case model.DisablePollingSource():
            return ""
        case model.SetTransform():
            aliases = ", ".join(i.alias or i.dataset_ref for i in event.inputs)
            engine = getattr(event.transform, "engine", _tag(event.transform))
            return f"{engine} over {len(event.inputs)} input(s): {aliases}"
        case model.SetVocab():
            columns = [
                f"{name}={value}"
                for name, value in (
                    ("offset", event.offset_column),
                    ("operationType", event.operation_type_column),
                    ("systemTime", event.system_time_column),
                    ("eventTime", event.event_time_column),
                )
                if value
            ]
            return ", ".join(columns)
        case model.SetAttachments():
            items = getattr(event.attachments, "items", ())
            return f"{len(items)} attachment(s)"
    return ""
