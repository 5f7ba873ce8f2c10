"""The ODF protocol: model, YAML, FlatBuffers, multiformats, identity, DDL. Bytes in, bytes out; no I/O."""
