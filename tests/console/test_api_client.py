"""The console's HTTP client: the session travels as the API's cookie, refusals become readable messages."""

import httpx
import pytest

from console.api import Api, ApiConfig, ApiError

pytestmark = pytest.mark.sqlite


async def test_session_from_login_is_sent_on_later_calls(api_app) -> None:
    config = ApiConfig("http://api.test", transport=httpx.ASGITransport(app=api_app))
    api = Api(config)
    body = await api.login("maria@acme.example", "demo")
    assert "session" not in body.model_dump() and api.session  # taken from the Set-Cookie, not the body
    me = await Api(config, api.session).me()
    assert me.email == "maria@acme.example"
    with pytest.raises(ApiError) as refused:
        await Api(config).me()
    assert refused.value.status == 401
    assert refused.value.message.startswith("You are not signed in")


async def test_member_asking_for_the_audit_trail_gets_a_readable_refusal(api_app) -> None:
    config = ApiConfig("http://api.test", transport=httpx.ASGITransport(app=api_app))
    api = Api(config)
    await api.login("alice@acme.example", "demo")
    with pytest.raises(ApiError) as refused:
        await api.audit()
    assert refused.value.status == 403
    assert (
        refused.value.message
        == "You are not allowed to do that. Only a company admin or an auditor can browse the audit trail"
    )


async def test_unreachable_api_is_said_plainly() -> None:
    with pytest.raises(ApiError) as refused:
        await Api(ApiConfig("http://127.0.0.1:9", timeout=2)).me()
    assert refused.value.code == "unreachable"
    assert refused.value.message.startswith("The Cleanroom API cannot be reached")


def test_error_details_read_as_sentences() -> None:
    syntax = ApiError(
        422, "syntax_error", {"message": "syntax error: invalid syntax (line 3)", "line": 3, "offset": 5}
    )
    assert syntax.message == "syntax error: invalid syntax (line 3)"
    refused = ApiError(
        403, "dataset_forbidden", {"refused": [{"dataset": "employees", "reason": "no HR permission"}]}
    )
    assert refused.message == "employees: no HR permission"
    assert ApiError(402, "credits_exhausted", None).message == "The company's credit pool is empty."
    assert ApiError(500, "internal_error", "unexpected KeyError; see the server log").message.startswith(
        "unexpected"
    )
