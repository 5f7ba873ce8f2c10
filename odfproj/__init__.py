"""odfproj: a declarative GitOps project framework for Open Data Fabric datasets."""

__version__ = "0.1.0"

#: The ODF specification version this package implements.
ODF_SPEC_VERSION = "0.35.0"
