"""A category and a one-line reason for a span the model flagged.

These cues never decide whether something is reported (the model and the structural checks do); they only
describe what the flagged span does, so the person approving a run can judge it quickly.
"""

from __future__ import annotations

import re

from backend.injection import categories as c
from backend.injection.reasons import LANGUAGE_NAMES as _NAMES
from backend.injection.reasons import render

_AI = (
    r"\b(?:ai|a\.i\.|assistant|language model|llm|chat ?gpt|gpt[\w.-]*|claude|gemini|copilot|chatbot|bot|model|agent|"
    r"ki|ia|assistent\w*|asistente|sprachmodell|modele|modelo|dan|mixtral|command r\+?|automated \w+)\b"
)
CUES: list[tuple[str, re.Pattern[str]]] = [  # the reason of each: reasons.py, "cue.<name>"
    (
        "exfiltration",
        re.compile(
            r"\b(?:send|sending|e-?mail|upload|post|forward|transfer|wire|share|export|leak|copy|paste|concatenate|invite|"
            r"sende\w*|schick\w*|uberweis\w*|lade|envia\w*|envoie\w*|vire|transfiere|sube|invia|stuur|envie|wyslij)\b"
            r"[^.!?\n]{0,160}?(?:https?://|www\.|[\w.+-]+@[\w-]+\.|\b[a-z]{2}\d{2}[a-z0-9]{10,30}\b|\baccount\b|\bkonto\b|"
            r"\bcuenta\b|\bcompte\b|\bwebsite\b|\bserver\b|\blink\b)"
        ),
    ),
    (
        "concealment",
        re.compile(
            r"\b(?:do not|don't|never|without) (?:tell\w*|mention\w*|inform\w*|reveal\w*|show\w*|ask\w*|notify\w*|alert\w*)\b|"
            r"\b(?:secretly|quietly|silently|covertly)\b|\bnicht (?:erwahnen|sagen)\b|\bno (?:menciones|digas)\b|\bne (?:mentionne|dis) pas\b"
        ),
    ),
    (
        "override",
        re.compile(
            r"\b(?:ignore|ignoring|disregard|forget|override|overwrite|bypass|instead|nevermind|stop (?:everything|what)|"
            r"(?:previous|prior|above|earlier|original|initial|new|real) (?:instructions?|iunstructions|directions|task|prompt|rules)|"
            r"before you (?:can )?(?:solve|do|answer|continue|start)|from now on|ignorier\w*|vergiss|ignora\w*|olvida\w*|oublie\w*|"
            r"negeer|zignoruj|dimentica|esqueca|無視|忽略)"
        ),
    ),
    (
        "roleplay",
        re.compile(
            r"\b(?:act as|pretend|roleplay|role-play|jailbr\w*|developer mode|dan mode|do anything now|no (?:restrictions|limits|filters)|"
            r"unfiltered|uncensored|you are (?:now|going to)|stay in character)\b"
        ),
    ),
    (
        "output",
        re.compile(
            r"\b(?:reply|respond|answer|say|print|output|write|report|translate)\b[^.!?\n]{0,40}?(?:only|just|exactly|nothing else|"
            r"the following|with|that)\b|\b(?:antworte|responde|reponds|rispondi|antwoord|odpowiedz)\b"
        ),
    ),
    (
        "code",
        re.compile(
            r"\b(?:socket|reverse shell|shell command|terminal|subprocess|curl|wget|powershell|bash|execute|exec|eval|"
            r"run (?:the|this|these|following) (?:command|code|script)|(?:open|establish) (?:a |an )?\w* ?connection)\b"
        ),
    ),
    ("addressed", re.compile(_AI + r"|\byou\b|\bdu\b|\btu\b")),
]
CATEGORY = {
    "exfiltration": c.EXFILTRATION,
    "concealment": c.CONCEALMENT,
    "override": c.OVERRIDE,
    "roleplay": c.OVERRIDE,
    "output": c.OVERRIDE,
    "addressed": c.ADDRESSED,
    "code": c.CODE_EXECUTION,
}
_STRICT_AI = re.compile(_AI)


# What the multilingual lexicons (lexicon.py) say a span does, for spans the English cues above do not describe:
# (concepts that must all be present, category, reason), first match first.
CONCEPT_CUES: list[tuple[frozenset[str], str, str]] = [
    (frozenset({"SEND", "DATA"}), c.EXFILTRATION, "concept.send_data"),
    (frozenset({"HIDE"}), c.CONCEALMENT, "concept.hide"),
    (frozenset({"FALSIFY", "TASK"}), c.OVERRIDE, "concept.falsify"),
    (frozenset({"COND", "TASK"}), c.OVERRIDE, "concept.conditional"),
    (frozenset({"IGNORE"}), c.OVERRIDE, "concept.ignore"),
    (frozenset({"AUTO"}), c.INSTRUCTION, "concept.auto"),
    (frozenset({"CHANGE"}), c.INSTRUCTION, "concept.change"),
    (frozenset({"DELETE"}), c.INSTRUCTION, "concept.delete"),
    (frozenset({"SEND"}), c.EXFILTRATION, "concept.send_data"),
]  # (concepts that must all be present, category, reason code in reasons.py)
LANGUAGE_NAMES = _NAMES["en"]


def _concept_reasons(span: str) -> tuple[str | None, list[str]]:
    from backend.injection.lexicon import concepts
    from backend.injection.model import tokens

    tags: set[str] = set()
    for t in tokens(span):
        tags |= concepts(t)
    parts = []
    if tags & {"AI", "READER"}:
        parts.append("concept.reader")
    category = None
    for needed, cat, reason in CONCEPT_CUES:
        if needed <= tags and reason not in parts:
            category = category or cat
            parts.append(reason)
    if category is None and parts:
        category = c.ADDRESSED
    return category, parts


def explain(span: str) -> tuple[str, str]:
    """(category, reason) for a folded span the model flagged. The reason is English; a span in another
    language says which."""
    category, codes = explain_codes(span)
    return category, render(codes)


def explain_codes(span: str) -> tuple[str, list[str]]:
    """(category, reason codes) for a folded span the model flagged (backend/injection/reasons.py renders
    them in the reader's language)."""
    from backend.injection.lexicon import guess_language

    found = [name for name, regex in CUES if regex.search(span)]
    parts = []
    if _STRICT_AI.search(span):
        parts.append("cue.addressed")
    parts += [f"cue.{name}" for name in found if name != "addressed"]
    main = next((n for n in found if n != "addressed"), found[0] if found else None)
    category = CATEGORY.get(main, c.INSTRUCTION) if main else c.INSTRUCTION
    language = guess_language(span) or ""
    if language not in LANGUAGE_NAMES:
        language = ""
    if language or not parts:
        concept_category, concept_parts = _concept_reasons(span)
        if concept_parts and (not parts or category in (c.INSTRUCTION, c.ADDRESSED)):
            parts = [p for p in parts if p != "cue.addressed"] + concept_parts
            category = concept_category or category
    if not parts:
        parts = ["model.instruction"]
    codes = parts[:3]
    if language:
        codes.append(f"language:{language}")
    return category, codes
