"""A finding's reason as codes, rendered in the reader's language.

The scanner describes a flagged span with reason codes (`CellHit.reason_codes`, `Finding.reason_codes`); the
one-line `reason` is their English rendering (the `cleanroom scan --json` contract and the assistant's text
keep it). The approval screen renders the codes in the reader's language with `render`. Only English is
written today (the console has no language setting yet): a translation is one more entry of `TEMPLATES`
with the same codes; a code missing from it falls back to English.

A code is `name` or `name:argument` (the argument is data: a language code, an encoding, hidden text).
"""

from __future__ import annotations

from collections.abc import Iterable

DEFAULT_LOCALE = "en"
JOIN = {"en": "; "}

LANGUAGE_NAMES = {
    "en": {"de": "German", "fr": "French", "es": "Spanish", "it": "Italian", "pt": "Portuguese", "nl": "Dutch",
           "pl": "Polish", "tr": "Turkish", "sv": "Swedish", "ja": "Japanese", "zh": "Chinese"},
}  # fmt: skip

TEMPLATES: dict[str, dict[str, str]] = {
    "en": {
        # explain.py: the English cues
        "cue.addressed": "addressed to the assistant",
        "cue.exfiltration": "asks to send data or money to an outside address",
        "cue.concealment": "asks to hide what it does from the user",
        "cue.override": "tries to replace the instructions the assistant was given",
        "cue.roleplay": "asks the assistant to take on another role without its rules",
        "cue.output": "dictates what the assistant must answer",
        "cue.code": "asks to run commands or open network connections",
        # explain.py: what the multilingual lexicons say a span does
        "concept.reader": "addressed to the assistant or to whoever processes the file",
        "concept.send_data": "asks to send or write data out",
        "concept.hide": "asks to leave something out or keep it from the user",
        "concept.falsify": "dictates what the assistant's output must state",
        "concept.conditional": 'gives orders for when the assistant does its task ("if you are summarising…")',
        "concept.ignore": "tries to replace the instructions the assistant was given",
        "concept.auto": "poses as a system or automation note",
        "concept.change": "asks to change a record or an approval",
        "concept.delete": "asks to delete records",
        "model.instruction": "reads like an instruction to the assistant rather than business data",
        "language": "text in {language}",
        # scanner.py
        "invisible": "holds invisible characters that can hide or reorder text",
        "invisible.hidden": "hides text in invisible characters: {arg!r}",
        "encoded": "{arg} text that decodes to an instruction",
        # tier 2 / 3 (backend/injection, the semantic scorer and the full encoder)
        "semantic": "its meaning is close to instructions planted for an assistant",
    }
}
# structural.py's checks: "structural.<check name>", their English reason registered by structural.py
STRUCTURAL_PREFIX = "structural."


def register(code: str, english: str) -> str:
    """Add a code with its English text (structural checks, a tier's own reasons); returns the code."""
    TEMPLATES[DEFAULT_LOCALE].setdefault(code, english)
    return code


def locales() -> list[str]:
    return sorted(TEMPLATES)


def _one(code: str, locale: str) -> str:
    name, _, arg = code.partition(":")
    table = TEMPLATES.get(locale) or TEMPLATES[DEFAULT_LOCALE]
    template = table.get(name) or TEMPLATES[DEFAULT_LOCALE].get(name)
    if template is None:
        return name  # an unknown code (a newer scanner's) still says something
    if name == "language":
        names = LANGUAGE_NAMES.get(locale) or LANGUAGE_NAMES[DEFAULT_LOCALE]
        return template.format(language=names.get(arg) or LANGUAGE_NAMES[DEFAULT_LOCALE].get(arg, arg))
    return template.format(arg=arg) if "{arg" in template else template


def render(codes: Iterable[str], locale: str = DEFAULT_LOCALE) -> str:
    """The one-line reason for `codes` in `locale` (English when the locale is unknown): the parts joined,
    the language the text is in, if any, in brackets at the end."""
    codes = list(codes)
    parts = [_one(code, locale) for code in codes if not code.startswith("language:")]
    line = JOIN.get(locale, "; ").join(parts)
    for code in codes:
        if code.startswith("language:"):
            line += f" ({_one(code, locale)})"
    return line
