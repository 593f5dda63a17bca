"""Exact structural checks: syntax that is an attack by its form, not by its phrasing.

Chat-template tokens and fake role headings, spreadsheet formulas that reach the network or run commands,
Markdown/HTML whose address carries data out, capture services, and code that opens connections or shells.
Each check has a weight: 1.0 and above is a finding by itself; weaker ones (a Markdown image, an address
with a data parameter, a role line) are evidence that lowers the bar for the learned model.

Every regex is linear-time on its input (no nested unbounded repetition) and is only run on text that holds
its trigger character, so ordinary business cells cost one `in` test per trigger.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from backend.injection import categories as c
from backend.injection.reasons import STRUCTURAL_PREFIX, register


@dataclass(frozen=True)
class Check:
    name: str
    category: str
    weight: float
    trigger: tuple[str, ...]  # at least one must be in the folded text for the regex to run
    regex: re.Pattern[str]
    reason: str


def _check(
    name: str, category: str, weight: float, trigger: tuple[str, ...], pattern: str, reason: str
) -> Check:
    register(STRUCTURAL_PREFIX + name, reason)  # its reason code, rendered in the reader's language
    return Check(name, category, weight, trigger, re.compile(pattern), reason)


FORMULA_START = r"(?:^|\n)[ \t]*['\"]?[=+@-]"
FORMULA = ("=", "+", "@", "-")  # with "(" below: the only cells a formula check reads

CHECKS: list[Check] = [
    _check(
        "template_token", c.ROLE_MARKER, 1.5, ("<", "[inst", "[/inst", "message]"),
        r"<\|(?:im_start|im_end|system|user|assistant|endoftext|begin_of_text|end_of_text|start_header_id|end_header_id|eot_id|"
        r"eom_id|fim_\w+|tool|ipython|im_sep)\|>|\[/?inst\]|<</?sys>>|<(?:start|end)_of_turn>|\[/?(?:system|assistant) message\]|"
        r"</?(?:system|assistant|system_prompt|sys_prompt|admin_instructions|system_message|im_start)>",
        "imitates a chat template token",
    ),
    _check(
        "role_heading", c.ROLE_MARKER, 1.5, ("#",),
        r"#{2,}\s*\(?(?:system|assistant|system_message|instructions?|response|new instructions?|system prompt|admin|sistema|"
        r"asistente|systeme|assistent)\b\)?\s*:?",
        "imitates a system or assistant heading",
    ),
    _check("json_role", c.ROLE_MARKER, 1.5, ("role",), r"[\"']role[\"']\s*:\s*[\"'](?:system|assistant|developer)[\"']",
           "imitates a chat message in JSON"),  # fmt: skip
    _check(
        "role_dialogue", c.ROLE_MARKER, 1.5, ("\n",),
        r"(?:^|\n)[ \t]*(?:user|human|usuario|utilisateur|benutzer)\s*:[^\n]*\n(?:[^\n]*\n){0,12}?[ \t]*(?:assistant|ai|bot|model|"
        r"gpt|asistente|assistent)\s*:",
        "imitates a conversation between a user and the assistant",
    ),
    _check("role_line", c.ROLE_MARKER, 0.5, ("assistant", "system", "ai", "human", "bot", "admin"),
           r"(?:^|\n|[\"'{\[(])[ \t]*(?:assistant|system|ai|human|bot|admin)\s*[:\]]\s*\S", "starts a line as a chat role"),  # fmt: skip
    _check(
        "markdown_image_query", c.EXFIL_URL, 1.5, ("![",),
        r"!\[[^\]\n]{0,200}\]\(\s*<?(?:https?:)?//[^)\s?]{1,400}\?[^)\s]{0,400}=",
        "a Markdown image whose address carries parameters (renders without a click)",
    ),
    _check(
        "html_image_query", c.EXFIL_URL, 1.5, ("<img", "<iframe", "<script"),
        r"<(?:img|iframe|script)\b[^>]{0,400}?\bsrc\s*=\s*[\"']?(?:https?:)?//[^\s\"'>?]{1,400}\?[^\s\"'>]{0,400}=",
        "an HTML image or frame whose address carries parameters",
    ),
    _check(
        "url_placeholder", c.EXFIL_URL, 1.5, ("//",),
        r"(?:https?:)?//[^\s\"'<>]{0,300}?(?:\{[^}\s]{1,40}\}|\$\{?[a-z_]{2,}|%s\b|<[a-z0-9_ ]{2,40}>|\[(?:[a-z_ ]*(?:data|info|"
        r"secret|key|token|email|name|password|content|result|summary|value|record|row)[a-z_ ]*)\]|\{\{)",
        "an address with a placeholder to be filled with data",
    ),
    _check(
        "capture_host", c.EXFIL_URL, 1.2, ("webhook", "requestbin", "requestcatcher", "pipedream", "ngrok", "burp", "oast", "interact", "pastebin", "transfer.sh", "hookbin", "beeceptor", "canary", "discord", "telegram", "dnslog", "ceye", "postb.in", "trycloudflare"),
        r"\b(?:webhook\.site|requestbin|pipedream\.net|ngrok(?:-free)?\.(?:io|app|dev)|burpcollaborator|oastify|interact\.sh|"
        r"oast\.(?:fun|me|live|site|pro|online)|pastebin\.com|transfer\.sh|hookbin|beeceptor|requestcatcher|canarytokens|"
        r"discord(?:app)?\.com/api/webhooks|api\.telegram\.org/bot|dnslog|ceye\.io|postb\.in|trycloudflare\.com|interactsh)",
        "an address of a request-capture service",
    ),
    _check(
        "url_sensitive_param", c.EXFIL_URL, 0.8, ("//",),
        r"(?:https?:)?//[^\s\"'<>?&]{1,300}[?&](?:[^\s\"'<>]{0,200}?[?&])?(?:exfil|leak|dump|secrets?|password|pwd|creds|"
        r"credentials|ssn|cookie|apikey|api_key|prompt|conversation|history|chat|stolen)=",
        "an address with a parameter named after secrets",
    ),
    _check("markdown_image", c.EXFIL_URL, 0.4, ("![",), r"!\[[^\]\n]{0,200}\]\(\s*<?(?:https?:)?//", "a Markdown image"),
    _check("url_data_param", c.EXFIL_URL, 0.4, ("//",),
           r"(?:https?:)?//[^\s\"'<>?&]{1,300}[?&](?:[^\s\"'<>]{0,200}?[?&])?(?:data|payload|d|content|contents|info|q|msg|text)=",
           "an address with a data parameter"),  # fmt: skip
    _check(
        "formula_fetch", c.FORMULA, 1.5, FORMULA,
        FORMULA_START + r"[^\n]{0,400}?\b(?:webservice|importxml|importdata|importhtml|importfeed|importrange|filterxml)\s*\(",
        "a spreadsheet formula that fetches from the network",
    ),
    _check(
        "formula_dynamic_link", c.FORMULA, 1.5, FORMULA,
        FORMULA_START + r"[^\n]{0,400}?\b(?:image|hyperlink)\s*\([^\n]{0,400}?(?:&|\?[^\n]{0,400}?=|concatenate|textjoin|encodeurl)",
        "a spreadsheet formula that builds an address from cell values",
    ),
    _check("formula_image", c.FORMULA, 0.5, FORMULA, FORMULA_START + r"[^\n]{0,400}?\bimage\s*\(", "a spreadsheet IMAGE formula"),
    _check(
        "formula_command", c.CODE_EXECUTION, 1.5, FORMULA,
        FORMULA_START + r"[^\n]{0,400}?(?:\b(?:cmd|powershell|pwsh|mshta|rundll32|regsvr32|certutil|bitsadmin|wscript|cscript|"
        r"msexcel)(?:\.exe)?\s*\||\b(?:dde|ddeauto|call|exec|register)\()",
        "a spreadsheet formula that runs a command (DDE)",
    ),
    _check(
        "sql_destructive", c.CODE_EXECUTION, 1.5, ("drop table", "truncate table", "delete from", "drop database"),
        r"\b(?:drop|truncate) (?:table|database) [\w.`\"\[\]]+\s*;|;\s*(?:drop|truncate) (?:table|database)\b|"
        r"\bdelete from [\w.`\"\[\]]+\s*;",
        "an SQL statement that destroys data",
    ),
    _check(
        "javascript_url", c.CODE_EXECUTION, 1.5, ("javascript:", "<script"),
        r"\bjavascript:\s*[\w(]|<script\b", "a script that would run when the text is rendered",
    ),
    _check(
        "code_network", c.CODE_EXECUTION, 1.5, ("requests.", "urllib", "urlopen", "socket", "subprocess", "os.system", "os.popen", "os.exec", "os.spawn", "__import__", "pty.", "/bin/", "bash", "sh -c", "powershell", "cmd", "nc -", "ncat", "netcat", "|", "rm -rf", "import ", "smtplib", "ftplib", "paramiko", "invoke-", "iex", "net.webclient"),
        r"requests\.(?:post|put)\(|urllib\.request|urlopen\(|socket\.(?:socket|create_connection)|subprocess\.\w+|"
        r"os\.(?:system|popen|exec\w*|spawn\w*)\(|__import__\(|pty\.spawn|/bin/(?:ba)?sh\b|\bbash -[ci]\b|\bsh -c\b|"
        r"\bpowershell(?:\.exe)?\s+-|\bcmd(?:\.exe)? /c\b|\bnc -[elv]|\bncat\b|\bnetcat\b|\|\s*(?:ba)?sh\b|\brm -rf /|"
        r"\bimport (?:socket|subprocess|smtplib|ftplib|paramiko)\b|\bsmtplib\.|\bftplib\.|\bparamiko\.|\binvoke-webrequest\b|"
        r"\binvoke-expression\b|\biex\s*\(|\bnew-object net\.webclient\b",
        "code that runs commands or opens connections",
    ),
]  # fmt: skip


@dataclass(frozen=True)
class StructuralHit:
    check: Check
    start: int
    end: int


def structural_hits(folded: str, weak: bool = False, screened: bool = False) -> list[StructuralHit]:
    """The strong checks (or, with weak=True, the weak ones) that match folded text, each once, strongest first.
    screened: the caller already knows that the text holds a trigger (see `with_triggers`)."""
    hits: list[StructuralHit] = []
    if not weak and not screened and not _ANY_TRIGGER.search(folded):
        return hits
    formula = "(" in folded and (folded.lstrip()[:1] in "=+@-'\"" or "\n" in folded)
    for check in WEAK if weak else STRONG_CHECKS:
        if check.trigger is FORMULA:
            if not formula:
                continue
        elif not any(t in folded for t in check.trigger):
            continue
        m = check.regex.search(folded)
        if m is not None:
            hits.append(StructuralHit(check, m.start(), m.end()))
    hits.sort(key=lambda h: -h.check.weight)
    return hits


STRONG_CHECKS = [check for check in CHECKS if check.weight >= 1.0]
WEAK = [check for check in CHECKS if check.weight < 1.0]
_ANY_TRIGGER = re.compile(
    "|".join(
        sorted(
            {re.escape(t) for check in STRONG_CHECKS if check.trigger is not FORMULA for t in check.trigger}
        )
    )
    + r"|^\s*['\"]?[=+@-]|\n"
)


_TRIGGER_STRINGS = sorted(
    {t for check in STRONG_CHECKS if check.trigger is not FORMULA for t in check.trigger}
)


def with_triggers(folded: list[str]) -> set[int]:
    """Indexes of the folded texts that hold a trigger of a strong check or may be a formula. One substring
    search per trigger over the whole batch (C speed); only triggers that occur are located."""
    from bisect import bisect_right

    sep = "\x00"
    joined = sep + sep.join(folded)
    starts = []
    pos = 1
    for f in folded:
        starts.append(pos)
        pos += len(f) + 1
    found = {i for i, f in enumerate(folded) if f and (f.lstrip()[:1] in "=+@-'\"" or "\n" in f)}
    for t in _TRIGGER_STRINGS:
        i = joined.find(t)
        while i >= 0:
            k = bisect_right(starts, i) - 1
            found.add(k)
            i = joined.find(t, starts[k + 1] if k + 1 < len(starts) else len(joined))
    return found
