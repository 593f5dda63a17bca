"""Scanning what a run hands back before the assistant reads it: its printed output, its conclusion.json and the
text files it returned. Code that summarises the staged data can copy a planted instruction into its output,
where the assistant would read it as if it came from the run; a finding here is shown to the person on the run
page and marked for the assistant with NOTICE.
"""

from __future__ import annotations

import json
from typing import Any

from backend.injection.categories import OUTPUT_NOTICE
from backend.injection.scanner import scan_text
from backend.injection.schemas import Finding

NOTICE = OUTPUT_NOTICE
STDOUT = "stdout"
CONCLUSION = "conclusion.json"
TEXT_SUFFIXES = (
    ".txt",
    ".csv",
    ".tsv",
    ".md",
    ".json",
    ".jsonl",
    ".html",
    ".htm",
    ".xml",
    ".log",
    ".yaml",
    ".yml",
)
MAX_FILE_BYTES = 1_000_000  # a returned text file is scanned up to this many bytes
MAX_TOTAL_BYTES = 4_000_000  # and no more than this across a run's files


def is_text_output(name: str) -> bool:
    return name.lower().endswith(TEXT_SUFFIXES)


def scan_outputs(
    stdout: str | None, conclusion: Any = None, files: list[tuple[str, bytes]] = ()
) -> list[Finding]:
    """Findings in a run's printed output (path "stdout", row = line), its conclusion (path "conclusion.json",
    scanned as indented JSON) and its returned text files (path = file name), at most MAX_TOTAL_BYTES of them."""
    findings: list[Finding] = []
    if stdout:
        findings += scan_text(stdout, path=STDOUT)
    if conclusion is not None:
        text = (
            conclusion
            if isinstance(conclusion, str)
            else json.dumps(conclusion, ensure_ascii=False, indent=1)
        )
        findings += scan_text(text, path=CONCLUSION)
    budget = MAX_TOTAL_BYTES
    for name, data in files:
        if budget <= 0 or not is_text_output(name):
            continue
        chunk = data[: min(MAX_FILE_BYTES, budget)]
        budget -= len(chunk)
        findings += scan_text(chunk.decode("utf-8", errors="replace"), path=name)
    return findings
