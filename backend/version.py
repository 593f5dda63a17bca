"""The package's version, as installed (pyproject.toml's `version`, read back through importlib.metadata): what
`cleanroom --version` prints and the OpenAPI document's `info.version` says. CHANGELOG.md names each release's
commit."""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version

try:
    VERSION = version("cleanroom")
except PackageNotFoundError:  # a source tree run without installing it (never the case under scripts/setup)
    VERSION = "0+unknown"
