"""Splits that vocabulary cannot win: leave one language out, leave one intent out, and paraphrase folds.

    python -m backend.injection_training.evaluate --splits [lolo,loio,paraphrase] [--json PATH]

Each fold trains a model without what it holds out (train.py `TrainingData.model(drop=…)`), calibrates
its threshold on the usual held-out English calibration set, installs it in the scanner, and scans the held-out
attacks of the intent corpus (intents.py) planted into business tables of their own language, and
business rows of the same languages for false positives (a row with any finding is a flagged row).

- **Leave one language out** (`lolo`): no training window in that language: the corpus's attacks and benign
  twins in it, the own multilingual cases in it, and every other training attack whose function words say it
  is in that language. Tested on the language's attacks (with their encoded forms); false positives on
  1,000 business rows of that language and on its benign twins.
- **Leave one intent out** (`loio`): no corpus attack of that intent in any language (for `encoded`, the items
  the encoded ones were made from are dropped too). Tested on that intent in all languages.
- **External** (`external`): no fold, the committed model on garak-multilingual's payloads (Turkish
  injections and jailbreaks, injections in eight languages), planted like the corpus: text nobody here wrote.
- **Paraphrase** (`paraphrase`): the corpus's meaning groups (the k-th item of an intent, in all languages)
  are dealt into five folds; a fold's items are held out in every language, and so is every training window
  from any source (public, own, regression, corpus) that holds one of their *content words* (tokens of three
  letters or more that are not function words, numbers or placeholders; CJK character bigrams). So a test
  item's words were never seen in a positive; only the concept lexicons (lexicon.py) connect them.

Benign twins of the test half (intents.twin_split) are held out of every fold's training; the business rows'
free text comes from held-out note templates, those twins and Faker sentences.

What these figures cannot show: the corpus, its benign twins and the lexicons were written by the same person,
so wording habits shared between them are not tested; a text written by someone else is the real test.
"""

from __future__ import annotations

import hashlib
import time
from collections import defaultdict
from collections.abc import Callable

from backend.injection.lexicon import is_function_word
from backend.injection.model import tokens
from backend.injection.text import CJK_RE, fold
from backend.injection_training import intents
from backend.injection_training.evaluate import scanner_flagger

ROWS_PER_LANGUAGE = 1000
PARAPHRASE_FOLDS = 5
SEED = 5151


def content_words(text: str) -> set[str]:
    """Features that stand for the content words of a text: word tokens (3+ letters, not function words, not
    placeholders) and, for CJK runs, their character-bigram features."""
    out: set[str] = set()
    for t in tokens(fold(text)):
        if t.startswith("<") or len(t) < 3 and not CJK_RE.search(t):
            continue
        if CJK_RE.search(t):
            out.update("#" + t[i : i + 2] for i in range(len(t) - 1) if CJK_RE.search(t[i : i + 2]))
            continue
        if t.isalpha() and not is_function_word(t):
            out.add(t)
    return out


def _score(planted: list[intents.Planted]) -> list[tuple[intents.Item, bool]]:
    out = []
    for p in planted:
        found = scanner_flagger(p.table.header, p.table.rows)
        for item, spots in p.planted.values():
            out.append((item, any((r + 1, p.table.header[c]) in found for r, c in spots)))
    return out


def _benign(langs: list[str], twins: list[intents.Item]) -> dict:
    rows = flagged = 0
    by_lang = {}
    examples = []
    for lang in langs:
        table = intents.business_rows(lang, ROWS_PER_LANGUAGE, SEED, [t for t in twins if t.lang == lang])
        found = scanner_flagger(table.header, table.rows)
        hit = {r for r, _ in found}
        by_lang[lang] = {"rows": len(table.rows), "flagged": len(hit)}
        rows += len(table.rows)
        flagged += len(hit)
        for r, col in sorted(found)[:3]:
            examples.append(table.rows[r - 1][table.header.index(col)])
    header = ["id", "note"]
    twin_rows = [[str(i), t.text] for i, t in enumerate(twins) if t.lang in langs]
    twin_found = {r for r, _ in scanner_flagger(header, twin_rows)} if twin_rows else set()
    # the twins also planted into business tables of their language like the attacks, in the free-text columns
    # beside ordinary notes: what a rule that reads a cell against its row or column costs on a contract clause,
    # an error message or a notice
    in_rows = [hit for _, hit in _score(intents.plant([t for t in twins if t.lang in langs], SEED + 2))]
    return {
        "rows": rows,
        "flagged_rows": flagged,
        "twins_in_rows": len(in_rows),
        "twins_in_rows_flagged": sum(in_rows),
        "fp_rate": flagged / max(1, rows),
        "by_language": by_lang,
        "twins": len(twin_rows),
        "twins_flagged": len(twin_found),
        "twins_flagged_texts": [twin_rows[r - 1][1] for r in sorted(twin_found)],
        "examples": examples[:10],
    }


def _recall(results: list[tuple[intents.Item, bool]], key: Callable[[intents.Item], str]) -> dict:
    agg: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    for item, hit in results:
        agg[key(item)][0] += 1
        agg[key(item)][1] += hit
    return {k: {"n": n, "caught": c, "recall": c / n} for k, (n, c) in sorted(agg.items())}


def _outcome(results: list[tuple[intents.Item, bool]]) -> dict:
    """What a set of planted attacks came to: recall overall, by intent and by language, and what was missed."""
    caught = sum(h for _, h in results)
    return {
        "n": len(results),
        "caught": caught,
        "recall": caught / max(1, len(results)),
        "by_intent": _recall(results, lambda i: i.label),
        "by_language": _recall(results, lambda i: i.lang),
        "missed": [f"{i.lang} {i.label}: {i.text[:140]}" for i, h in results if not h],
    }


TIER3: list = []  # [Embedder] when the splits measure tiers 1 and 3 (run(..., tier3=True))


def _run_fold(data, name: str, drop, drop_negative, test: list[intents.Item], langs: list[str], log) -> dict:
    """One fold: tier 1 retrained without what it holds out; with TIER3, tier 1 alone is measured first
    ("tier1") and then tiers 1 and 3, tier 3's head fitted on the same windows and its threshold read from the
    calibration negatives the fold's own tier 1 leaves to tier 3."""
    from backend.injection import encoder
    from backend.injection.scanner import use_model

    t0 = time.time()
    model = data.model(drop=drop, drop_negative=drop_negative)
    use_model(model)
    twins = [t for t in intents.benign_twins() if drop_negative(t.key)]
    before = None
    if TIER3:
        from backend.injection_training import tier3

        with encoder.off():
            before = {**_outcome(_score(intents.plant(test, SEED, twins))), "benign": _benign(langs, twins)}
        keep_pos, keep_neg = data.masks(drop=drop, drop_negative=drop_negative)
        encoder.use(None)
        head = tier3.build(TIER3[0], data, keep_pos, keep_neg)
        encoder.use(tier3.installed(TIER3[0], head))
    else:
        encoder.use(None)
    results = _score(intents.plant(test, SEED, twins))
    benign = _benign(langs, twins)
    fold = {
        **_outcome(results),
        "benign": benign,
        "threshold": model.threshold,
        "positive_windows": model.meta["positive_windows"],
    }
    if before is not None:
        fold["tier1"] = before
        fold["tier3_head"] = {"threshold": head.threshold, "calibration": head.meta["threshold_calibration"]}
        b = before["benign"]
        log(f"  {name:<24} tier 1 alone: recall {before['recall']:.3f} ({before['caught']}/{before['n']})  benign rows "
            f"flagged {b['flagged_rows']}/{b['rows']}, twins {b['twins_flagged']}/{b['twins']} (in rows "
            f"{b['twins_in_rows_flagged']}/{b['twins_in_rows']}); bar {head.threshold:.3f} ({head.meta['threshold_calibration']})")  # fmt: skip
    caught = fold["caught"]
    log(f"  {name:<24} recall {fold['recall']:.3f} ({caught}/{len(results)})  benign rows flagged "
        f"{benign['flagged_rows']}/{benign['rows']} = {benign['fp_rate']:.3%}, twins {benign['twins_flagged']}/"
        f"{benign['twins']} (in rows {benign['twins_in_rows_flagged']}/{benign['twins_in_rows']})  [{time.time() - t0:.0f}s, {model.meta['positive_windows']} positive windows]")  # fmt: skip
    return fold


def _test_twin(key: str) -> bool:
    item = _TWINS.get(key)
    return item is not None and intents.twin_split(item) == "test"


_TWINS: dict[str, intents.Item] = {}


def lolo(data, log) -> dict:
    out = {}
    for lang in intents.LANGS:
        test = [a for a in intents.attacks() if a.lang == lang]
        out[lang] = _run_fold(
            data,
            f"language {lang}",
            drop=lambda f, fam, lg, key, lang=lang: lg == lang,
            drop_negative=lambda key, lang=lang: key.startswith(lang + "/") or _test_twin(key),
            test=test,
            langs=[lang],
            log=log,
        )
    return out


def loio(data, log) -> dict:
    out = {}
    for intent in intents.INTENTS:
        test = [a for a in intents.attacks() if a.label == intent]
        sources = {intents.encoded_source(a) for a in test} - {None}

        def drop(f, fam, lg, key, intent=intent, sources=sources):
            if key is None:
                return False
            group = key.split("/", 1)[1]
            return group.startswith(intent + "/") or group in sources

        out[intent] = _run_fold(data, f"intent {intent}", drop, _test_twin, test, intents.LANGS, log)
    return out


def paraphrase_fold(group: str) -> int:
    base = group.split("/", 1)[1] if group.startswith("encoded/") else group
    return int(hashlib.sha256(("para|" + base).encode()).hexdigest()[:8], 16) % PARAPHRASE_FOLDS


def paraphrase(data, log) -> dict:
    out = {}
    for k in range(PARAPHRASE_FOLDS):
        test = [a for a in intents.attacks() if paraphrase_fold(a.group) == k]
        groups = {a.group for a in test} | {intents.encoded_source(a) for a in test} - {None}
        words: set[str] = set()
        for a in test:
            words |= content_words(a.joined)

        def drop(f, fam, lg, key, groups=groups, words=words):
            if key is not None and key.split("/", 1)[1] in groups:
                return True
            return not words.isdisjoint(f)

        fold = _run_fold(data, f"paraphrase fold {k}", drop, _test_twin, test, intents.LANGS, log)
        fold["content_words_held_out"] = len(words)
        out[str(k)] = fold
    return out


def _pool(folds: dict) -> dict:
    n = sum(f["n"] for f in folds.values())
    caught = sum(f["caught"] for f in folds.values())
    rows = sum(f["benign"]["rows"] for f in folds.values())
    flagged = sum(f["benign"]["flagged_rows"] for f in folds.values())
    by_lang: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    by_intent: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    for f in folds.values():
        for k, v in f["by_language"].items():
            by_lang[k][0] += v["n"]
            by_lang[k][1] += v["caught"]
        for k, v in f["by_intent"].items():
            by_intent[k][0] += v["n"]
            by_intent[k][1] += v["caught"]
    return {
        "recall": caught / max(1, n),
        "n": n,
        "caught": caught,
        "benign_rows": rows,
        "benign_flagged_rows": flagged,
        "benign_fp_rate": flagged / max(1, rows),
        "twins_flagged": sum(f["benign"]["twins_flagged"] for f in folds.values()),
        "twins": sum(f["benign"]["twins"] for f in folds.values()),
        "twins_in_rows_flagged": sum(f["benign"]["twins_in_rows_flagged"] for f in folds.values()),
        "twins_in_rows": sum(f["benign"]["twins_in_rows"] for f in folds.values()),
        "recall_by_language": {k: round(c / n_, 3) for k, (n_, c) in sorted(by_lang.items())},
        "recall_by_intent": {k: round(c / n_, 3) for k, (n_, c) in sorted(by_intent.items())},
    }


def external(log) -> dict:
    """The committed model (no retraining) on garak-multilingual's payloads (Apache-2.0, written outside this
    project, never trained on or tuned against), each planted in a business table of its language (English
    tables for Russian, Arabic and Persian, which the corpus does not have)."""
    from backend.injection_training.sources import garak_multilingual_attacks

    found = garak_multilingual_attacks()
    items, true_lang = [], {}
    for k, (lang, text, set_name) in enumerate(found):
        table_lang = lang if lang in intents.LANGS else "en"
        item = intents.Item(table_lang, "external." + set_name, text, f"external/{k}")
        items.append(item)
        true_lang[item.key] = lang
    results = _score(intents.plant(items, SEED))
    caught = sum(h for _, h in results)
    out = {
        "source": "garak-multilingual 0.1.0 (Apache-2.0)",
        "n": len(results),
        "caught": caught,
        "recall": caught / max(1, len(results)),
        "by_language": _recall(results, lambda i: true_lang[i.key]),
        "by_set": _recall(results, lambda i: i.label),
        "missed": [f"{true_lang[i.key]}: {i.text[:140]}" for i, h in results if not h],
    }
    log(f"  garak-multilingual: recall {out['recall']:.3f} ({caught}/{len(results)}); by language "
        + ", ".join(f"{k} {v['caught']}/{v['n']}" for k, v in out["by_language"].items()))  # fmt: skip
    return out


def blind(log) -> dict:
    """The shipped model (no retraining) on the blind set (intents.blind_items: 13 languages × 8 intents and
    6 benign twins per language, written before the round of tuning it measures and never looked at item by
    item): attacks planted like the corpus's, business rows of the 13 languages, and the twins one by one.
    Only aggregates are printed; the missed items are in the JSON report."""
    found = intents.blind_items()
    attacks = [i for i in found if i.positive]
    twins = [i for i in found if not i.positive]
    results = _score(intents.plant(attacks, SEED))
    caught = sum(h for _, h in results)
    langs = sorted({i.lang for i in found})
    rows = flagged = 0
    for lang in langs:
        table = intents.business_rows(lang, ROWS_PER_LANGUAGE, SEED + 1, [])
        hit = {r for r, _ in scanner_flagger(table.header, table.rows)}
        rows += len(table.rows)
        flagged += len(hit)
    twin_rows = [[str(i), t.text] for i, t in enumerate(twins)]
    twin_found = {r for r, _ in scanner_flagger(["id", "note"], twin_rows)}
    out = {
        **_outcome(results),
        "benign_rows": rows,
        "benign_flagged_rows": flagged,
        "benign_fp_rate": flagged / max(1, rows),
        "twins": len(twin_rows),
        "twins_flagged": len(twin_found),
        "twins_flagged_texts": [twin_rows[r - 1][1] for r in sorted(twin_found)],
    }
    log(f"  blind: recall {out['recall']:.3f} ({caught}/{len(results)}); benign rows flagged {flagged}/{rows} = "
        f"{out['benign_fp_rate']:.3%}; twins flagged {len(twin_found)}/{len(twin_rows)}")  # fmt: skip
    log("  by language: " + ", ".join(f"{k} {v['caught']}/{v['n']}" for k, v in out["by_language"].items()))
    log("  by intent: " + ", ".join(f"{k} {v['caught']}/{v['n']}" for k, v in out["by_intent"].items()))
    return out


def unseen(log) -> dict:
    """Tiers 1 and 3 as shipped (no retraining) on the languages nobody here writes (intents.unseen_items:
    12 languages with no training data and no lexicon entry; measure once). Attacks planted in business tables
    of their language (Faker's locale; the set's own ordinary notes as free text); 1,000 business rows per
    language; the set's benign cells one by one, the over-defence ones (`benign.trigger.*`) apart."""
    found = intents.unseen_items()
    attacks = [i for i in found if i.positive]
    benign_items = [i for i in found if not i.positive]
    notes = [i for i in benign_items if i.label == "benign.note"]
    results = _score(intents.plant(attacks, SEED, notes))
    langs = sorted({i.lang for i in found})
    by_lang: dict[str, dict] = {}
    for lang in langs:
        table = intents.business_rows(lang, ROWS_PER_LANGUAGE, SEED + 1, [n for n in notes if n.lang == lang])
        rows_hit = {r for r, _ in scanner_flagger(table.header, table.rows)}
        mine = [i for i in benign_items if i.lang == lang]
        cells = [[str(k), i.text] for k, i in enumerate(mine)]
        hit = {r for r, _ in scanner_flagger(["id", "note"], cells)}
        trig = [k for k, i in enumerate(mine) if i.label.startswith("benign.trigger")]
        other = [k for k, i in enumerate(mine) if not i.label.startswith("benign.trigger")]
        caught = [h for i, h in results if i.lang == lang]
        by_lang[lang] = {
            "recall": sum(caught) / max(1, len(caught)), "caught": sum(caught), "n": len(caught),
            "rows": len(table.rows), "rows_flagged": len(rows_hit),
            "benign": len(other), "benign_flagged": sum(k + 1 in hit for k in other),
            "trigger": len(trig), "trigger_flagged": sum(k + 1 in hit for k in trig),
        }  # fmt: skip
        v = by_lang[lang]
        log(f"  {lang}: recall {v['caught']}/{v['n']} = {v['recall']:.3f}; business rows flagged {v['rows_flagged']}/"
            f"{v['rows']}; benign cells {v['benign_flagged']}/{v['benign']}; over-defence {v['trigger_flagged']}/{v['trigger']}")  # fmt: skip
    out = {**_outcome(results), "by_lang": by_lang}
    out["rows"] = sum(v["rows"] for v in by_lang.values())
    out["rows_flagged"] = sum(v["rows_flagged"] for v in by_lang.values())
    out["benign_flagged"] = sum(v["benign_flagged"] for v in by_lang.values())
    out["benign"] = sum(v["benign"] for v in by_lang.values())
    out["trigger_flagged"] = sum(v["trigger_flagged"] for v in by_lang.values())
    out["trigger"] = sum(v["trigger"] for v in by_lang.values())
    log(f"  unseen pooled: recall {out['caught']}/{out['n']} = {out['recall']:.3f}; rows {out['rows_flagged']}/{out['rows']}; "
        f"benign cells {out['benign_flagged']}/{out['benign']}; over-defence {out['trigger_flagged']}/{out['trigger']}")  # fmt: skip
    return out


def run(which: list[str], log=print, tier3: bool = False) -> dict:
    from backend.injection import encoder, scanner
    from backend.injection_training.train import TrainingData

    report: dict = {}
    if "unseen" in which:
        log("unseen languages (shipped tiers; measure once):")
        report["unseen"] = unseen(log)
        with encoder.off():
            log("unseen languages, tier 1 alone (shipped):")
            report["unseen_tier1"] = unseen(log)
    if "blind" in which:
        log("blind (shipped model; measure once):")
        report["blind"] = blind(log)
    if "external" in which:
        log("external (committed model):")
        report["external"] = external(log)
    if not {"lolo", "loio", "paraphrase"} & set(which):
        return report
    _TWINS.update({t.key: t for t in intents.benign_twins()})
    data = TrainingData.build()
    if tier3:
        from backend.injection_training.tier3 import Embedder

        TIER3[:] = [Embedder()]
        TIER3[0](data.pos_text + data.neg_text, log=log)
    try:
        for name, fn in (("lolo", lolo), ("loio", loio), ("paraphrase", paraphrase)):
            if name in which:
                log(f"{name}:")
                folds = fn(data, log)
                report[name] = {"pooled": _pool(folds), "folds": folds}
                if tier3:
                    report[name]["pooled_tier1"] = p1 = _pool({k: f["tier1"] for k, f in folds.items()})
                    log(f"{name} pooled, tier 1 alone: recall {p1['recall']:.3f} ({p1['caught']}/{p1['n']}), benign rows "
                        f"flagged {p1['benign_flagged_rows']}/{p1['benign_rows']} = {p1['benign_fp_rate']:.3%}, twins "
                        f"{p1['twins_flagged']}/{p1['twins']} (in rows {p1['twins_in_rows_flagged']}/{p1['twins_in_rows']})")  # fmt: skip
                p = report[name]["pooled"]
                log(f"{name} pooled: recall {p['recall']:.3f} ({p['caught']}/{p['n']}), benign rows flagged "
                    f"{p['benign_flagged_rows']}/{p['benign_rows']} = {p['benign_fp_rate']:.3%}, twins "
                    f"{p['twins_flagged']}/{p['twins']} (in rows {p['twins_in_rows_flagged']}/{p['twins_in_rows']})")  # fmt: skip
    finally:
        scanner.use_model(None)
        scanner._MODEL.clear()
        encoder.reset()
        TIER3.clear()
    return report
