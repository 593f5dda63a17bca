"""A caller is a person only when its context says how it signed in: a context built without saying (a
future caller that forgets `auth=`) may read and decides nothing."""

from __future__ import annotations

import pytest

from backend.errors import Forbidden
from backend.tenancy.context import OPERATOR, SESSION, TOKEN, UserContext


def _ctx(**auth: object) -> UserContext:
    return UserContext(user_id=1, company_id=1, email="a@x.example", name="A", role="admin", **auth)  # type: ignore[arg-type]


def test_a_context_that_does_not_say_how_it_signed_in_decides_nothing() -> None:
    nobody = _ctx()
    assert not nobody.is_person
    with pytest.raises(Forbidden):
        nobody.require_person("approving a run")
    assert nobody.via() == {"auth": "unstated"}


def test_control_a_session_and_the_operator_are_people_and_a_token_is_not() -> None:
    for auth in (SESSION, OPERATOR):
        _ctx(auth=auth).require_person("approving a run")
    assert not _ctx(auth=TOKEN).is_person
