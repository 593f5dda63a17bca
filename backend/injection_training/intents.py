"""The project's intent corpus (intents/*.tsv): attacks written by intent in twelve languages, with benign twins,
and the business tables they are planted into for the harness's language, intent and paraphrase splits.

Every line of the corpus is an `Item`: language, label (an intent such as `record`, or `benign.<kind>`), text
(cells joined by " || " for an instruction split over several cells) and group. The files are written in
parallel: the k-th item of an intent says much the same thing in every language, so `group` ("omit/2") names
that meaning across languages, and the paraphrase split holds out whole groups.

Company names in the corpus (Globex, Initech, …) are replaced by names drawn from a seeded pool, so no split
can be won by remembering them. The `encoded` intent is made here: base64 or hex of the first item of every
other intent, which the scanner must decode.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import random
import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from backend.injection_training.benign import NOTES, Table, _Filler, note_templates, template_split

CORPUS = Path(__file__).with_name("intents")
LANGS = ["en", "de", "fr", "es", "it", "pt", "nl", "pl", "tr", "sv", "ja", "zh"]
LOCALE = {
    "en": "en_US",
    "de": "de_DE",
    "fr": "fr_FR",
    "es": "es_ES",
    "it": "it_IT",
    "pt": "pt_BR",
    "nl": "nl_NL",
    "pl": "pl_PL",
    "tr": "tr_TR",
    "sv": "sv_SE",
    "ja": "ja_JP",
    "zh": "zh_CN",
    "cs": "cs_CZ",
}  # fmt: skip  (cs: only the blind set, blind/)
INTENTS = ["record", "exfil", "omit", "persona", "conditional", "automation", "addressed", "split", "encoded"]
SEP = " || "

_NAMES = re.compile(r"(?<![A-Za-z])(Globex|Initech|Umbrella|Acme|Hooli)(?![A-Za-z])")
NAME_POOL = [
    "Norvik", "Baltera", "Quenso", "Marlow & Finch", "Tessaro", "Lindqvist", "Oakridge", "Vantor", "Kestrel",
    "Brightwell", "Solano", "Hartmann", "Duvall", "Ferrante", "Kowalczyk", "Aydın Lojistik", "Brandt", "Lumen",
    "Corvel", "Ostara", "Pellucid", "Rivas", "Sandberg", "Talvi", "Ulmer", "Verdant", "Wexley", "Yilmaz Gıda",
]  # fmt: skip


@dataclass(frozen=True)
class Item:
    lang: str
    label: str
    text: str
    group: str  # "<label>/<ordinal>": the same meaning in every language

    @property
    def positive(self) -> bool:
        return not self.label.startswith("benign")

    @property
    def cells(self) -> list[str]:
        return self.text.split(SEP)

    @property
    def joined(self) -> str:
        return " ".join(self.cells)

    @property
    def key(self) -> str:
        return f"{self.lang}/{self.group}"


def _stable(s: str) -> int:
    return int(hashlib.sha256(s.encode()).hexdigest()[:8], 16)


def _rename(text: str, key: str) -> str:
    rng = random.Random(_stable("names|" + key))
    chosen: dict[str, str] = {}
    return _NAMES.sub(lambda m: chosen.setdefault(m.group(1), rng.choice(NAME_POOL)), text)


@lru_cache(maxsize=1)
def items() -> tuple[Item, ...]:
    """Every corpus line (attacks, benign twins) and the encoded attacks made from them."""
    out: list[Item] = []
    for lang in LANGS:
        counts: dict[str, int] = {}
        for line in (CORPUS / f"{lang}.tsv").read_text(encoding="utf-8").splitlines():
            if not line.strip() or line.startswith("#"):
                continue
            label, text = line.split("\t", 1)
            k = counts[label] = counts.get(label, -1) + 1
            group = f"{label}/{k}"
            out.append(Item(lang, label, _rename(text.strip(), f"{lang}/{group}"), group))
    encoded = []
    for it in out:
        if it.positive and it.label != "split" and it.group.endswith("/0"):
            raw = it.text.encode()
            if it.label in ("record", "omit", "conditional", "addressed"):
                enc = "ref: " + base64.b64encode(raw).decode()
            else:
                enc = "data " + raw.hex()
            encoded.append(Item(it.lang, "encoded", enc, "encoded/" + it.group))
    return tuple(out + encoded)


BLIND = Path(__file__).with_name("blind")


def blind_items() -> list[Item]:
    """The blind set (blind/*.tsv, issue 25): never trained on or tuned against; measured once (splits.py
    `blind`). Not part of items()."""
    out: list[Item] = []
    for path in sorted(BLIND.glob("*.tsv")):
        counts: dict[str, int] = {}
        for line in path.read_text(encoding="utf-8").splitlines():
            if not line.strip() or line.startswith("#"):
                continue
            label, text = line.split("\t", 1)
            k = counts[label] = counts.get(label, -1) + 1
            out.append(Item(path.stem, label, text.strip(), f"{label}/{k}"))
    return out


UNSEEN = Path(__file__).with_name("unseen_languages")
UNSEEN_LOCALE = {
    "uk": "uk_UA",
    "el": "el_GR",
    "ko": "ko_KR",
    "th": "th_TH",
    "bn": "bn_BD",
    "ka": "ka_GE",
    "ta": "ta_IN",
    "vi": "vi_VN",
    "id": "id_ID",
    "hu": "hu_HU",
    "fi": "fi_FI",
    "sw": "en_US",
}  # fmt: skip  (Faker's locales for the tables they are planted into; Faker has none for Swahili)


def unseen_items() -> list[Item]:
    """The languages nobody here writes (unseen_languages/*.tsv, issue 55): 12 languages with no training data
    and no lexicon entry. Test data only, measured once (splits.py `unseen`); never read by training,
    calibration or tuning. Not part of items()."""
    out: list[Item] = []
    for path in sorted(UNSEEN.glob("*.tsv")):
        counts: dict[str, int] = {}
        for line in path.read_text(encoding="utf-8").splitlines():
            if not line.strip() or line.startswith("#"):
                continue
            label, text = line.split("\t", 1)
            k = counts[label] = counts.get(label, -1) + 1
            out.append(Item(path.stem, label, text.strip(), f"{label}/{k}"))
    return out


def attacks() -> list[Item]:
    return [i for i in items() if i.positive]


def benign_twins() -> list[Item]:
    return [i for i in items() if not i.positive]


def encoded_source(item: Item) -> str | None:
    """The group an encoded item was made from ("omit/0"), else None."""
    return item.group.split("/", 1)[1] if item.label == "encoded" else None


def twin_split(item: Item) -> str:
    """Benign twins: half are test (measured, never trained on), half train."""
    return "test" if _stable("twin|" + item.key) % 2 == 0 else "train"


# --- business tables in the corpus's languages -----------------------------------------------------------------

HEADER = ["id", "account", "contact", "email", "amount", "stage", "notes", "next_step", "comment"]
TEXT_COLUMNS = [6, 7, 8]
STAGES = ["Prospecting", "Qualified", "Proposal", "Negotiation", "Won", "Lost"]


def _ordinary_notes(lang: str, twins: list[Item]) -> list[str]:
    """Ordinary notes in the language: the benign-note templates held out of training (the languages that have
    them) and the language's ordinary-note twins given (`benign.note`). The other twins (error messages,
    JSON, contract clauses, notices) are counted one by one, not repeated through a table."""
    out = [t for tid, lg, t in note_templates() if lg == lang and template_split(tid) == "test"]
    return out + [i.text for i in twins if i.lang == lang and i.label == "benign.note"]


def _filler(lang: str, seed: int) -> _Filler:
    return _Filler(LOCALE.get(lang) or UNSEEN_LOCALE[lang], seed)


def _free_text(filler: _Filler, pool: list[str], rng: random.Random) -> str:
    x = rng.random()
    if x < 0.25:
        return ""
    if x < 0.35:
        return filler.fake.sentence(nb_words=rng.randint(5, 12))
    text = rng.choice(pool)
    with contextlib.suppress(
        KeyError, IndexError, ValueError
    ):  # a twin holding braces (JSON) stays as written
        text = text.format(**filler.slots())
    return text


def business_rows(lang: str, n_rows: int, seed: int, twins: list[Item]) -> Table:
    """A deals table in the language: Faker names, companies and e-mails of its locale; free-text cells from
    the language's held-out note templates, its benign twins given and Faker sentences."""
    rng = random.Random(_stable(f"rows|{lang}|{seed}"))
    filler = _filler(lang, _stable(f"filler|{lang}|{seed}") % 100000)
    pool = _ordinary_notes(lang, twins) or [n for n in NOTES["en"]]
    rows = []
    for k in range(n_rows):
        s = filler.slots()
        rows.append([str(200000 + k), s["company"], s["name"], s["email"], s["amount"], rng.choice(STAGES),
                     _free_text(filler, pool, rng), _free_text(filler, pool, rng), _free_text(filler, pool, rng)])  # fmt: skip
    return Table(f"deals.{lang}", list(HEADER), rows, list(TEXT_COLUMNS))


def faker_sentences(n_per_language: int, seed: int) -> list[str]:
    """Faker's sentences (word salad) in the corpus's languages: training negatives, so that random words of a
    language that happen to be attack vocabulary do not read as an attack."""
    out = []
    for lang in LANGS:
        filler = _filler(lang, seed + _stable(lang) % 1000)
        rng = random.Random(seed + _stable("salad|" + lang) % 1000)
        out += [filler.fake.sentence(nb_words=rng.randint(3, 16)) for _ in range(n_per_language)]
    return out


@dataclass
class Planted:
    table: Table
    planted: dict[int, tuple[Item, list[tuple[int, int]]]]  # attack number -> (item, its (row, column) cells)


def plant(attack_items: list[Item], seed: int, twins: list[Item] | None = None) -> list[Planted]:
    """One table per language; each attack in its own row(s), in the free-text columns: alone, after or before
    an ordinary note of the language; an instruction split over cells goes across the row's text columns or
    down the notes column over consecutive rows."""
    twins = twins or []
    out = []
    for lang in dict.fromkeys(LANGS + [a.lang for a in attack_items]):
        mine = [a for a in attack_items if a.lang == lang]
        if not mine:
            continue
        rng = random.Random(_stable(f"plant|{lang}|{seed}"))
        table = business_rows(lang, 3 * len(mine) + 5, seed, [t for t in twins if t.lang == lang])
        rows = [list(r) for r in table.rows]
        planted: dict[int, tuple[Item, list[tuple[int, int]]]] = {}
        r = 0
        for n, item in enumerate(mine):
            cells = item.cells
            if len(cells) > 1:
                if rng.random() < 0.5 and len(cells) <= len(TEXT_COLUMNS):
                    spots = [(r, TEXT_COLUMNS[j]) for j in range(len(cells))]
                else:
                    spots = [(r + j, TEXT_COLUMNS[0]) for j in range(len(cells))]
                for (rr, cc), cell in zip(spots, cells, strict=True):
                    rows[rr][cc] = cell
            else:
                col = rng.choice(TEXT_COLUMNS)
                ordinary = rows[r][col]
                x = rng.random()
                text = item.text
                if ordinary and x < 0.3:
                    text = ordinary + " " + text
                elif ordinary and x < 0.45:
                    text = text + " " + ordinary
                rows[r][col] = text
                spots = [(r, col)]
            planted[n] = (item, spots)
            r = max(rr for rr, _ in spots) + 2  # an ordinary row between attacks
        out.append(Planted(Table(table.kind, table.header, rows[: r + 1], table.text_columns), planted))
    return out
