"""Conversion in a child process: same result, but a hard wall-clock and memory ceiling."""

from __future__ import annotations

from backend.convert import ConvertLimits, convert
from backend.convert.isolated import convert_isolated
from backend.demo.files import FEEDBACK_NAME, PRICE_LIST_NAME, demo_drive_files


def test_isolated_conversion_gives_the_same_result():
    files = dict(demo_drive_files())
    for name in (FEEDBACK_NAME, PRICE_LIST_NAME):
        isolated, local = convert_isolated(files[name], name), convert(files[name], name)
        isolated.elapsed_ms = local.elapsed_ms = 0
        assert isolated == local


def test_isolated_conversion_reports_errors_the_same_way():
    converted = convert_isolated(b'{"a": ', "broken.json")
    assert converted.kind == "json" and "not valid JSON" in converted.error


def test_a_child_past_its_ceiling_is_killed():
    converted = convert_isolated(
        dict(demo_drive_files())[PRICE_LIST_NAME],
        "prices.pdf",
        limits=ConvertLimits(time_limit_seconds=0),
        grace_seconds=0.05,
    )
    assert converted.error == "Conversion took longer than the 0 s limit, so the file was not staged."


def test_a_child_out_of_memory_is_a_clear_error():
    numbers = b"[" + b"1," * 8_000_000 + b"1]"  # ~16 MB that becomes far more as Python objects
    converted = convert_isolated(numbers, "numbers.json", memory_bytes=256 * 1024 * 1024)
    assert converted.error == "The file needs too much memory to convert and was not staged."
