"""The workload: an assistant and a person using the product while it is being broken.

Every request goes into the history with what came back, and "no answer" when the API was down or answered
5xx: the soak never assumes a request it did not see answered took effect. It keeps a few approved runs in
flight (a 2-core machine runs guests under software emulation) and otherwise does, in a seeded order:
propose a run of some kind, approve or reject a waiting one, accept or reject a proposed change, propose a
follow-up under the company's follow-up rule, a two-step flow, and once, a schedule firing every minute.
"""

from __future__ import annotations

import json
import random
import time
from dataclasses import dataclass, field
from typing import Any

import httpx

from backend.soak.deployment import Deployment

PERSON = "maria@acme.example"
ADMIN = "admin@acme.example"
CONVERSATION = "soak"
IN_FLIGHT = 3  # approved runs not yet ended, at most
TERMINAL = {"rejected", "succeeded", "failed", "timed_out", "out_of_memory", "error", "cancelled", "skipped"}

CODE = {
    "ok": "import os\nprint(os.urandom(8).hex())\n",
    "fail": "raise SystemExit('the soak asked for a failure')\n",
    "timeout": "import time\nprint('sleeping past the limit', flush=True)\ntime.sleep(600)\n",
    "memory": "chunks = []\nwhile True:\n    chunks.append(bytearray(64 * 1024 * 1024))\n",
}
LIMITS = {"timeout": {"wall_seconds": 20}, "memory": {"memory_mib": 256}}


def actions_code(title: str) -> str:
    """A run that proposes one change: a new task whose title is unique to it (the invariants count it)."""
    entry = {"op": "create", "dataset": "tasks", "changes": {"title": title, "status": "open"}}
    return (
        "import json\n"
        f"json.dump([{json.dumps(entry)}], open('/work/output/actions.json', 'w'))\n"
        "print('one change proposed')\n"
    )


@dataclass
class History:
    started: float = field(default_factory=time.monotonic)
    events: list[dict[str, Any]] = field(default_factory=list)

    def add(self, event: str, **data: Any) -> None:
        self.events.append({"t": round(time.monotonic() - self.started, 2), "event": event, **data})

    def of_run(self, run_id: int) -> list[dict[str, Any]]:
        return [e for e in self.events if e.get("run") == run_id or run_id in e.get("runs", ())]


class Workload:
    def __init__(self, dep: Deployment, rng: random.Random, history: History) -> None:
        self.dep = dep
        self.rng = rng
        self.history = history
        self.person: httpx.Client | None = None
        self.admin: httpx.Client | None = None
        self.assistant: httpx.Client | None = None
        self.runs: dict[int, dict[str, Any]] = {}  # what the soak knows of each run it made
        self.titles: dict[str, int] = {}  # task title a run proposes -> the run
        self.schedule_id: int | None = None
        self.counter = 0

    # ---------------------------------------------------------------------------------- sessions, requests

    def sign_in(self) -> bool:
        """The person's and the admin's sessions and the assistant's token (again after the API came back:
        sessions survive a restart, but a request may have been lost in the middle of signing in)."""
        try:
            if self.person is None:
                self.person = self._session(PERSON)
                token = self.person.post("/api/me/tokens", json={"name": "soak"}).json()["token"]
                self.assistant = httpx.Client(
                    base_url=self.dep.url, headers={"Authorization": f"Bearer {token}"}, timeout=60
                )
            if self.admin is None:
                self.admin = self._session(ADMIN)
                self.admin.patch(
                    "/api/company/settings",
                    json={"followup_without_reapproval": True, "followup_grant_max_runs": 100},
                ).raise_for_status()
        except (httpx.HTTPError, KeyError, ValueError):
            self.person = self.admin = self.assistant = None
            return False
        return True

    def _session(self, email: str) -> httpx.Client:
        client = httpx.Client(base_url=self.dep.url, headers={"Origin": self.dep.url}, timeout=60)
        client.post("/api/auth/login", json={"email": email, "password": "demo"}).raise_for_status()
        return client

    def _call(self, who: str, method: str, path: str, **kwargs: Any) -> httpx.Response | None:
        """One request; None (and a history line) when it got no answer or a 5xx: its effect is unknown."""
        client = {"person": self.person, "admin": self.admin, "assistant": self.assistant}[who]
        if client is None:
            return None
        try:
            response = client.request(method, path, **kwargs)
        except httpx.HTTPError as exc:
            self.history.add("no_answer", who=who, request=f"{method} {path}", error=type(exc).__name__)
            return None
        if response.status_code >= 500:
            self.history.add("no_answer", who=who, request=f"{method} {path}", status=response.status_code)
            return None
        return response

    # ------------------------------------------------------------------------------------------ the steps

    def step(self) -> None:
        if self.person is None and not self.sign_in():
            return
        self.refresh()
        waiting = [r for r in self.runs.values() if r["status"] == "awaiting_approval"]
        running = [r for r in self.runs.values() if r["approved"] and r["status"] not in TERMINAL]
        choices: list[tuple[str, float]] = [("decide_item", 2.0)]
        if waiting:
            choices.append(("decide_run", 4.0))
        if len(running) < IN_FLIGHT and len(waiting) < 3:
            choices += [("propose", 4.0), ("followup", 1.0), ("flow", 0.4)]
        if self.schedule_id is None:
            choices.append(("schedule", 0.3))
        names, weights = zip(*choices, strict=True)
        getattr(self, "_" + self.rng.choices(names, weights)[0])()

    def _propose(self, kind: str | None = None, followup_of: int | None = None) -> None:
        kind = kind or self.rng.choices(["ok", "fail", "timeout", "memory", "actions"], [4, 1, 1, 1, 2])[0]
        self.counter += 1
        title = f"soak {self.counter} {kind}"
        code = actions_code(title) if kind == "actions" else CODE[kind]
        body: dict[str, Any] = {
            "conversation_id": CONVERSATION,
            "title": title,
            "plan": "soak",
            "code": code,
            # a change may only touch what the run staged: the actions runs stage the tasks they add to
            "datasets": ["deals", "tasks"] if kind == "actions" else ["deals"],
        }
        if kind in LIMITS:
            body["limits"] = LIMITS[kind]
        if followup_of is not None:
            body["followup_of"] = followup_of
        r = self._call("assistant", "POST", "/api/runs", json=body)
        if r is None:
            return
        if r.status_code != 201:
            self.history.add("refused", request="propose", kind=kind, status=r.status_code, body=r.text[:300])
            return
        run = r.json()
        self.runs[run["id"]] = {
            "id": run["id"],
            "kind": kind,
            "status": run["status"],
            "approved": run["status"] != "awaiting_approval",
            "hashes": {"code_sha256": run["code_sha256"], "bundle_sha256": run["bundle_sha256"]},
            "followup_of": followup_of,
        }
        if kind == "actions":
            self.titles[title] = run["id"]
        self.history.add("proposed", run=run["id"], kind=kind, status=run["status"], followup_of=followup_of)

    def _followup(self) -> None:
        parents = [r for r in self.runs.values() if r["status"] == "succeeded" and r.get("person_approved")]
        if parents:
            self._propose("ok", followup_of=self.rng.choice(parents)["id"])

    def _decide_run(self) -> None:
        waiting = [r for r in self.runs.values() if r["status"] == "awaiting_approval"]
        run = self.rng.choice(waiting)
        if not run["hashes"].get(
            "code_sha256"
        ):  # a run the soak found listed: what the approval screen shows
            r = self._call("person", "GET", f"/api/runs/{run['id']}")
            if r is None or r.status_code != 200:
                return
            detail = r.json()
            run["hashes"] = {"code_sha256": detail["code_sha256"], "bundle_sha256": detail["bundle_sha256"]}
        if self.rng.random() < 0.85:
            r = self._call("person", "POST", f"/api/runs/{run['id']}/approve", json=run["hashes"])
            verdict = "approve"
        else:
            r = self._call("person", "POST", f"/api/runs/{run['id']}/reject", json={"reason": "soak"})
            verdict = "reject"
        if r is not None:
            self.history.add(verdict, run=run["id"], status=r.status_code)
            if r.status_code == 200:
                run["status"] = r.json().get("status", run["status"])
                run["approved"] = verdict == "approve"
                run["person_approved"] = verdict == "approve"

    def _decide_item(self) -> None:
        candidates = [r for r in self.runs.values() if r["kind"] == "actions" and r["status"] == "succeeded"]
        if not candidates:
            return
        run = self.rng.choice(candidates)
        r = self._call("person", "GET", f"/api/runs/{run['id']}/action-items")
        if r is None or r.status_code != 200:
            return
        pending = [i for i in r.json() if i["status"] == "pending"]
        if not pending:
            return
        item = pending[0]
        verdict = "accept" if self.rng.random() < 0.7 else "reject"
        r = self._call("person", "POST", f"/api/action-items/{item['id']}/{verdict}", json={})
        if r is not None:
            self.history.add(f"item_{verdict}", run=run["id"], item=item["id"], status=r.status_code)

    def _flow(self) -> None:
        self.counter += 1
        steps = [
            {
                "title": "write",
                "code": "open('/work/output/n.txt','w').write('41')\nprint('wrote')\n",
                "datasets": ["deals"],
            },
            {
                "title": "read",
                "code": "import glob\nprint(int(open(glob.glob('/work/flow/**/n.txt', recursive=True)[0]).read()) + 1)\n",
                "receives": [{"step": 1, "name": "n.txt"}],
                "datasets": ["deals"],
            },
        ]
        body = {"conversation_id": CONVERSATION, "title": f"soak flow {self.counter}", "steps": steps}
        r = self._call("assistant", "POST", "/api/flows", json=body)
        if r is None or r.status_code != 201:
            if r is not None:
                self.history.add("refused", request="flow", status=r.status_code, body=r.text[:300])
            return
        flow = r.json()
        step_runs = [s["run"]["id"] for s in flow["steps"]]
        hashes = [
            {"code_sha256": s["run"]["code_sha256"], "bundle_sha256": s["run"]["bundle_sha256"]}
            for s in flow["steps"]
        ]
        self.history.add("flow_proposed", flow=flow["id"], runs=step_runs)
        r = self._call("person", "POST", f"/api/flows/{flow['id']}/approve", json={"steps": hashes})
        if r is not None:
            self.history.add("flow_approve", flow=flow["id"], runs=step_runs, status=r.status_code)
        for run_id in step_runs:
            self.runs[run_id] = {
                "id": run_id,
                "kind": "flow",
                "status": "waiting",
                "approved": True,
                "hashes": {},
            }

    def _schedule(self) -> None:
        done = [r for r in self.runs.values() if r["kind"] == "ok" and r["status"] == "succeeded"]
        if not done:
            return
        body = {"run_id": done[0]["id"], "cron": "* * * * *"}
        r = self._call("person", "POST", "/api/schedules", json=body)
        if r is None:
            return
        if r.status_code != 201:
            self.history.add("refused", request="schedule", status=r.status_code, body=r.text[:300])
            return
        self.schedule_id = r.json()["id"]
        self.history.add("schedule", run=done[0]["id"], schedule=self.schedule_id)

    def end_schedule(self) -> None:
        if self.schedule_id is not None:
            r = self._call("person", "DELETE", f"/api/schedules/{self.schedule_id}")
            self.history.add("schedule_deleted", schedule=self.schedule_id, status=r and r.status_code)

    # ------------------------------------------------------------------------------------------- reading

    def refresh(self) -> None:
        """The status of every run the soak knows and has not seen end, and the runs schedules fired."""
        r = self._call("person", "GET", "/api/runs", params={"limit": 200})
        if r is None or r.status_code != 200:
            return
        for row in r.json()["items"]:
            known = self.runs.get(row["id"])
            if known is None:  # a schedule's firing (or a follow-up whose answer was lost)
                known = self.runs[row["id"]] = {
                    "id": row["id"],
                    "kind": "other",  # a schedule's firing, or a proposal whose answer was lost
                    "status": row["status"],
                    "approved": row["status"] != "awaiting_approval",
                    "hashes": {
                        "code_sha256": row.get("code_sha256"),
                        "bundle_sha256": row.get("bundle_sha256"),
                    },
                }
            if known["status"] != row["status"]:
                self.history.add("status", run=row["id"], status=row["status"])
                known["status"] = row["status"]
                if row["status"] not in ("awaiting_approval", "rejected"):
                    known["approved"] = True

    def unsettled(self) -> list[int]:
        return sorted(r["id"] for r in self.runs.values() if r["approved"] and r["status"] not in TERMINAL)
