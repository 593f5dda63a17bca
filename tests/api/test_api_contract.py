"""The API's contract as an outsider reads it: `/schema/openapi.json` against what the served API really answers.

- A property-based fuzzer nobody here wrote (schemathesis, every check on) drives the real server with an
  assistant's token and finds no failure: every status it meets is declared, every body matches its schema,
  every request the document calls valid is accepted, every one it calls invalid refused, `OPTIONS` names each
  method; its positive control shows the same run fails on a document that leaves one refusal out.
- A client generated from the document (datamodel-code-generator's models) decodes a refusal of each kind
  through the schema the document names for it, and every 429 carries `Retry-After`.
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.support.mcp import ApiServer

SCHEMATHESIS = [sys.executable, "-m", "schemathesis.cli"]
CONFIG = Path(__file__).parent / "contract" / "schemathesis.toml"  # the rules JSON Schema cannot state


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ApiServer]:
    api = ApiServer(tmp_path_factory.mktemp("contract-api")).start()
    try:
        yield api
    finally:
        api.stop()


@pytest.fixture(scope="module")
def document(server: ApiServer) -> dict:
    token, _ = server.token("alice@acme.example")
    r = httpx.get(server.api_url + "/schema/openapi.json", headers={"Authorization": f"Bearer {token}"})
    assert r.status_code == 200, r.text  # the assistant reads the contract it must follow
    return r.json()


def _fuzz(
    server: ApiServer, token: str | None, *extra: str, schema: str | None = None, session: str | None = None
) -> subprocess.CompletedProcess:
    """The fuzzer as an assistant (a bearer token) or as a person signed in (`session`: the cookie header;
    changes carry the API's Origin, as the console's do)."""
    who = (
        ["--header", f"Authorization: Bearer {token}"]
        if token
        else ["--header", f"Cookie: {session}", "--header", f"Origin: {server.api_url}"]
    )
    return subprocess.run(
        [
            *SCHEMATHESIS,
            "--config-file",
            str(CONFIG),
            "run",
            schema or server.api_url + "/schema/openapi.json",
            *(["--url", server.api_url] if schema else []),
            "--checks",
            "all",
            *who,
            "--max-examples",
            "5",
            "--generation-deterministic",
            # generated cases (hypothesis, every check on each answer); the coverage phase (the boundaries of every
            # parameter and field, 3,497 cases against this document, 0 failures on 2026-12-06) takes four times
            # as long and is run by hand before a release: `schemathesis run URL --checks all --phases coverage`
            *(extra if "--phases" in extra else ("--phases", "fuzzing", *extra)),
            "--no-color",
        ],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=server.data_dir,
    )


def _signed_in(server: ApiServer, email: str) -> str:
    with httpx.Client(base_url=server.api_url) as client:
        r = client.post("/api/v1/auth/login", json={"email": email, "password": "demo"})
        assert r.status_code == 200, r.text
        return "; ".join(f"{name}={value}" for name, value in client.cookies.items())


def test_the_fuzzer_finds_no_contract_failure_with_an_assistants_token(server: ApiServer) -> None:
    token, _ = server.token("alice@acme.example")
    result = _fuzz(server, token)
    assert result.returncode == 0, result.stdout[-12000:]
    assert "Tested:" in result.stdout  # it ran the operations (a run that tested nothing passes too)


def test_control_the_fuzzer_fails_a_document_that_leaves_a_refusal_out(
    server: ApiServer, document: dict, tmp_path: Path
) -> None:
    """The same run, on the document without `POST /api/runs`'s 403: an assistant whose company has code
    execution off is refused with it (`Globex` ships off), so the fuzzer must report an undocumented status."""
    stripped = json.loads(json.dumps(document))
    del stripped["paths"]["/api/v1/runs"]["post"]["responses"]["403"]
    path = tmp_path / "openapi.json"
    path.write_text(json.dumps(stripped))
    token, _ = server.token("gina@globex.example")
    one = ("--include-path", "/api/v1/runs", "--include-method", "POST", "--phases", "fuzzing")
    result = _fuzz(server, token, *one, schema=str(path))
    assert result.returncode != 0
    assert "Undocumented status code" in result.stdout and "403" in result.stdout, result.stdout[-4000:]


def _generated_models(document: dict, tmp_path: Path) -> object:
    out = tmp_path / "contract_models.py"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "datamodel_code_generator",
            "--input-file-type",
            "openapi",
            "--output-model-type",
            "pydantic_v2.BaseModel",
            "--output",
            str(out),
        ],
        input=json.dumps(document),
        text=True,
        check=True,
        capture_output=True,
        timeout=300,
    )
    spec = importlib.util.spec_from_file_location("contract_models", out)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules["contract_models"] = module
    spec.loader.exec_module(module)
    return module


def _declared_model(document: dict, models: object, method: str, path: str, status: int) -> type:
    response = document["paths"]["/api/v1" + path][method.lower()]["responses"][str(status)]
    (media, body), *_ = response["content"].items()
    assert media == "application/problem+json"
    return getattr(models, body["schema"]["$ref"].rsplit("/", 1)[1])


def test_a_generated_client_decodes_a_refusal_of_each_kind(
    server: ApiServer, document: dict, tmp_path: Path
) -> None:
    models = _generated_models(document, tmp_path)
    token, _ = server.token("alice@acme.example")
    assistant = {"Authorization": f"Bearer {token}"}
    too_large = {"conversation_id": "c", "title": "t", "code": "x" * 200_001, "datasets": ["deals"]}
    with server.session("admin@acme.example") as admin, httpx.Client(base_url=server.api_url) as anonymous:
        v1 = "/api/v1"
        refusals = [
            # (method, documented path, the answer, its status)
            ("GET", "/runs", anonymous.get(f"{v1}/runs"), 401),
            (
                "POST",
                "/runs/{run_id}/approve",
                anonymous.post(f"{v1}/runs/1/approve", headers=assistant, json={}),
                403,
            ),
            ("GET", "/runs/{run_id}", anonymous.get(f"{v1}/runs/987654", headers=assistant), 404),
            ("POST", "/company/teams", admin.post(f"{v1}/company/teams", json={"name": "East"}), 409),
            ("POST", "/runs", anonymous.post(f"{v1}/runs", headers=assistant, json=too_large), 413),
            ("GET", "/runs", anonymous.get(f"{v1}/runs", headers=assistant, params={"until": "0.5"}), 422),
        ]
        for _ in range(6):  # the sign-in limit (5 a window in tests) answers 429
            limited = anonymous.post(f"{v1}/auth/login", json={"email": "bob@acme.example", "password": "no"})
        refusals.append(("POST", "/auth/login", limited, 429))
    for method, path, response, status in refusals:
        assert response.status_code == status, (path, response.status_code, response.text)
        assert response.headers["content-type"].startswith("application/problem+json"), path
        problem = _declared_model(document, models, method, path, status).model_validate_json(
            response.content
        )
        assert problem.status == status and problem.error and problem.detail, (path, problem)
        assert problem.type == f"urn:cleanroom:problem:{problem.error}"
    assert int(limited.headers["retry-after"]) >= 1
    validation = refusals[5][2].json()
    assert validation["fields"][0]["key"] == "until"  # a 422 says which field


def test_the_paths_without_the_version_are_deprecated_aliases(server: ApiServer, document: dict) -> None:
    token, _ = server.token("alice@acme.example")
    with httpx.Client(base_url=server.api_url, headers={"Authorization": f"Bearer {token}"}) as assistant:
        current = assistant.get("/api/v1/records/deals", params={"page_size": 5})
        alias = assistant.get("/api/records/deals", params={"page_size": 5})
        refused = assistant.get("/api/runs/987654")
    assert current.status_code == alias.status_code == 200 and current.json() == alias.json()
    assert "deprecation" not in current.headers  # control: the versioned path is the current one
    assert alias.headers["deprecation"] == "true"
    assert alias.headers["link"] == '</api/v1/records/deals>; rel="successor-version"'
    assert refused.status_code == 404 and refused.headers["deprecation"] == "true"  # refusals too
    assert all(p.startswith("/api/v1/") for p in document["paths"]), "the document names only versioned paths"


# What ends the session the fuzzer signs in with (changing the password ends only the OTHER sessions): run on
# its own, with a session of its own to end.
SESSION_ENDING = ("/api/v1/auth/logout",)


def test_the_fuzzer_finds_no_contract_failure_in_an_admins_session(server: ApiServer) -> None:
    """Every route an admin's session reaches (the company, its people, teams, datasets, SSO, webhooks, the
    audit trail and its reports), every check on. Last in this file on purpose: the fuzzer changes the
    company (its people, settings, datasets) that the tests above read."""
    skip = [arg for path in SESSION_ENDING for arg in ("--exclude-path", path)]
    result = _fuzz(server, None, *skip, session=_signed_in(server, "admin@acme.example"))
    assert result.returncode == 0, result.stdout[-12000:]
    assert "Tested:" in result.stdout and "Authentication failed" not in result.stdout, result.stdout[-6000:]
    for path in SESSION_ENDING:
        only = ("--include-path", path, "--max-examples", "2")
        ended = _fuzz(server, None, *only, session=_signed_in(server, "admin@acme.example"))
        assert ended.returncode == 0, ended.stdout[-6000:]
