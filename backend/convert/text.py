"""Bytes to text (BOM, UTF-8, then charset-normalizer), and the plain-text kinds: text, Markdown, JSON."""

from __future__ import annotations

import codecs
import json
import unicodedata

from backend.convert.model import ConversionFailed, Converted, ConvertLimits, pretty_json

BOMS = (
    (codecs.BOM_UTF32_LE, "utf-32"),
    (codecs.BOM_UTF32_BE, "utf-32"),
    (codecs.BOM_UTF8, "utf-8-sig"),
    (codecs.BOM_UTF16_LE, "utf-16"),
    (codecs.BOM_UTF16_BE, "utf-16"),
)
SINGLE_BYTE_LATIN = {
    "cp1250", "cp1252", "cp1254", "cp1257", "latin_1", "iso8859_2", "iso8859_3", "iso8859_4", "iso8859_9",
    "iso8859_10", "iso8859_13", "iso8859_14", "iso8859_15", "iso8859_16", "mac_latin2", "mac_roman",
    "mac_iceland", "mac_turkish", "cp437", "cp775", "cp850", "cp852", "cp858",
}  # fmt: skip
REPLACED_UTF8 = "utf-8 (invalid bytes replaced)"
ALLOWED_CONTROLS = set("\t\n\r\f\v\x1b")


class NotText(Exception):
    pass


def decode_text(data: bytes) -> tuple[str, str]:
    """(text, encoding name) or NotText when the bytes are not text in any encoding we trust."""
    for bom, encoding in BOMS:
        if data.startswith(bom):
            try:
                return _checked(data.decode(encoding)), encoding.replace("-sig", "")
            except UnicodeDecodeError as exc:
                raise NotText(f"it starts with a {encoding} marker but is not valid {encoding}") from exc
    if b"\x00" in data[:65536]:
        encoding = _utf16_without_bom(data)
        if encoding is None:
            raise NotText("it contains binary data")
        try:
            return _checked(data.decode(encoding)), encoding
        except UnicodeDecodeError as exc:
            raise NotText("it contains binary data") from exc
    try:
        return _checked(data.decode("utf-8")), "utf-8"
    except UnicodeDecodeError:
        pass
    from charset_normalizer import from_bytes

    best = from_bytes(data[: 4 * 1024 * 1024]).best()
    if best is None or best.encoding is None:
        # Mostly UTF-8 with a few broken bytes (a bad copy-paste, a cut multi-byte character) is still text.
        text = data.decode("utf-8", errors="replace")
        if text.count("\ufffd") <= max(1, len(text) // 100):
            return _checked(text), REPLACED_UTF8
        raise NotText("its text encoding could not be recognised")
    try:
        guessed = data.decode(best.encoding)
    except (UnicodeDecodeError, LookupError) as exc:
        raise NotText("its text encoding could not be recognised") from exc
    if best.encoding in SINGLE_BYTE_LATIN and best.encoding != "cp1252":
        # charset-normalizer often names a cousin (mac_latin2, cp1250) for ordinary Western files; prefer
        # Windows-1252 unless it turns more non-ASCII characters into symbols than the guess does.
        try:
            western = data.decode("cp1252")
            if _letter_share(western) >= _letter_share(guessed):
                return _checked(western), "cp1252"
        except UnicodeDecodeError:
            pass
    return _checked(guessed), best.encoding


def _letter_share(text: str) -> float:
    sample = [ch for ch in text[:200_000] if ord(ch) > 127]
    if not sample:
        return 1.0
    return sum(1 for ch in sample if unicodedata.category(ch).startswith("L") or ch == "€") / len(sample)


def _utf16_without_bom(data: bytes) -> str | None:
    sample = data[:4096]
    even_zeros = sample[0::2].count(0)
    odd_zeros = sample[1::2].count(0)
    half = max(len(sample) // 2, 1)
    if odd_zeros > 0.3 * half and even_zeros < 0.05 * half:
        return "utf-16-le"
    if even_zeros > 0.3 * half and odd_zeros < 0.05 * half:
        return "utf-16-be"
    return None


def _checked(text: str) -> str:
    sample = text[:65536]
    controls = sum(1 for ch in sample if unicodedata.category(ch) == "Cc" and ch not in ALLOWED_CONTROLS)
    if controls > max(2, len(sample) // 200):
        raise NotText("it contains binary data")
    return text


def _bounded(text: str, limits: ConvertLimits, converted: Converted) -> str:
    if len(text) > limits.max_text_chars:
        converted.text_truncated = True
        converted.warnings.append(f"The text was cut to its first {limits.max_text_chars:,} characters.")
        return text[: limits.max_text_chars]
    return text


def normalise_newlines(text: str) -> str:
    return text.replace("\r\n", "\n").replace("\r", "\n")


def convert_plain(text: str, kind: str, limits: ConvertLimits, encoding: str) -> Converted:
    converted = Converted(kind=kind, details={"encoding": encoding})
    converted.text = _bounded(normalise_newlines(text), limits, converted)
    return converted


def convert_json(text: str, limits: ConvertLimits) -> Converted:
    try:
        value = json.loads(text)
    except (ValueError, RecursionError) as exc:
        if isinstance(exc, json.JSONDecodeError):
            detail = f"line {exc.lineno}, column {exc.colno}: {exc.msg}"
        else:
            detail = "nested too deeply" if isinstance(exc, RecursionError) else str(exc)
        raise ConversionFailed(f"The JSON file is not valid JSON ({detail}).") from exc
    converted = Converted(kind="json")
    try:
        pretty = pretty_json(value)
    except RecursionError as exc:
        raise ConversionFailed("The JSON file is nested too deeply to convert.") from exc
    converted.text = _bounded(pretty, limits, converted)
    return converted
