"""Images and scans to text, offline, with Debian's tesseract CLI (package tesseract-ocr, tesseract-ocr-eng)."""

from __future__ import annotations

import io
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

from backend.convert.model import ConversionFailed, Converted, ConvertLimits, Deadline

OCR_LANGUAGE = "eng"
MIN_OCR_SIDE = 1000  # small images are scaled up: tesseract reads ~10 px glyphs poorly


class TesseractMissing(Exception):
    def __str__(self) -> str:
        return "the OCR program tesseract is not installed on this server (Debian package tesseract-ocr)"


def tesseract_available() -> bool:
    return shutil.which("tesseract") is not None


def ocr_png_file(path: Path, deadline: Deadline) -> str:
    """Text tesseract reads from one image file; raises TesseractMissing or subprocess errors."""
    binary = shutil.which("tesseract")
    if binary is None:
        raise TesseractMissing()
    env = {**os.environ, "OMP_THREAD_LIMIT": "1"}  # tesseract's OpenMP threads make small pages slower
    result = subprocess.run(
        [binary, str(path), "stdout", "-l", OCR_LANGUAGE, "--psm", "3"],
        capture_output=True,
        timeout=max(1.0, deadline.remaining()),
        env=env,
        check=False,
    )
    if result.returncode != 0:
        detail = result.stderr.decode("utf-8", "replace").strip().splitlines()
        raise subprocess.CalledProcessError(
            result.returncode, "tesseract", stderr=detail[-1] if detail else ""
        )
    return result.stdout.decode("utf-8", "replace").replace("\x0c", "").strip() + "\n"


def convert_image(data: bytes, limits: ConvertLimits, deadline: Deadline) -> Converted:
    from PIL import Image, ImageOps, ImageSequence, UnidentifiedImageError

    if not tesseract_available():
        raise ConversionFailed(f"The image could not be converted to text: {TesseractMissing()}.")
    try:
        image = Image.open(io.BytesIO(data))
        width, height = image.size
    except Image.DecompressionBombError as exc:
        raise ConversionFailed(
            "The image is too large to convert safely (it looks like a decompression bomb)."
        ) from exc
    except (UnidentifiedImageError, OSError, ValueError, SyntaxError) as exc:
        raise ConversionFailed(f"The image is damaged or in an unsupported format ({exc}).") from exc
    if width * height > limits.max_image_pixels:
        raise ConversionFailed(
            f"The image is {width:,}×{height:,} pixels, over the {limits.max_image_pixels:,}-pixel limit."
        )

    converted = Converted(kind="image")
    # Pages of a multi-page TIFF are a scanned document; frames of a GIF/WebP/APNG are an animation, whose
    # first frame stands for the picture.
    frame_count = getattr(image, "n_frames", 1) if image.format == "TIFF" else 1
    texts: list[str] = []
    with tempfile.TemporaryDirectory(prefix="cleanroom-ocr-") as tmp:
        for number, frame in enumerate(ImageSequence.Iterator(image), start=1):
            if number > frame_count:
                break
            if number > limits.max_ocr_pages:
                converted.warnings.append(
                    f"Only the first {limits.max_ocr_pages} of {frame_count} pages of the image were OCRed."
                )
                converted.text_truncated = True
                break
            deadline.check()
            try:
                prepared = _prepare(ImageOps.exif_transpose(frame) if number == 1 else frame)
                target = Path(tmp, f"page{number}.png")
                prepared.save(target, format="PNG")
                text = ocr_png_file(target, deadline)
            except subprocess.TimeoutExpired as exc:
                deadline.check()
                raise ConversionFailed("OCR of the image did not finish in time.") from exc
            except subprocess.CalledProcessError as exc:
                raise ConversionFailed(f"OCR of the image failed ({exc.stderr or exc.returncode}).") from exc
            except (OSError, ValueError, SyntaxError) as exc:
                raise ConversionFailed(f"The image is damaged and could not be decoded ({exc}).") from exc
            texts.append(f"--- page {number} ---\n{text}" if frame_count > 1 else text)
    converted.pages = frame_count if frame_count > 1 else None
    converted.text = "".join(texts)
    if not converted.text.strip():
        converted.warnings.append("OCR found no text in the image.")
    else:
        converted.warnings.append("The text comes from OCR and may contain recognition errors.")
    return converted


def _prepare(frame):
    from PIL import Image

    if "A" in frame.mode or "transparency" in frame.info:
        # Transparent pixels are often black underneath; put the scan on white paper first.
        rgba = frame.convert("RGBA")
        paper = Image.new("RGBA", rgba.size, "white")
        paper.alpha_composite(rgba)
        image = paper.convert("L")
    else:
        image = frame.convert("L") if frame.mode not in ("L", "1") else frame
    shortest = min(image.size)
    if 0 < shortest < MIN_OCR_SIDE:
        factor = min(4.0, MIN_OCR_SIDE / shortest)
        image = image.resize((round(image.width * factor), round(image.height * factor)), Image.LANCZOS)
    return image
