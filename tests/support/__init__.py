"""Helpers the tests share, one module per concern. A test imports them from here (`from tests.support.http
import login`), never from a conftest or another test module: a conftest holds fixtures only, and a test file
holds tests (tests/test_layout.py checks both)."""
