"""The few mails Cleanroom sends (an invitation, a password reset): plain text over SMTP when `smtp_host` is
set (settings: smtp_*), from a worker thread. Without SMTP nothing is sent and the caller shows the link once
to the admin or the operator instead. A mail that fails is logged (never its link) and the link stays valid:
the admin can resend it."""

from __future__ import annotations

import asyncio
import logging
import smtplib
from email.message import EmailMessage

from backend.settings import get_settings

log = logging.getLogger("cleanroom.mail")


def configured() -> bool:
    return bool(get_settings().smtp_host)


def _send(to: str, subject: str, body: str) -> None:
    settings = get_settings()
    message = EmailMessage()
    message["From"] = settings.smtp_from
    message["To"] = to
    message["Subject"] = subject
    message.set_content(body)
    assert settings.smtp_host
    with smtplib.SMTP(settings.smtp_host, settings.smtp_port, timeout=settings.smtp_timeout_seconds) as smtp:
        if settings.smtp_starttls:
            smtp.starttls()
        if settings.smtp_username:
            smtp.login(settings.smtp_username, settings.smtp_password or "")
        smtp.send_message(message)


async def send(to: str, subject: str, body: str) -> bool:
    """Send one mail; True when the SMTP server took it. False (logged) when it failed or SMTP is not set."""
    if not configured():
        return False
    try:
        await asyncio.to_thread(_send, to, subject, body)
    except (OSError, smtplib.SMTPException) as exc:
        log.warning("mail to %s (%s) was not sent: %s", to, subject, type(exc).__name__)
        return False
    return True
