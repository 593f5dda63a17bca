"""`cleanroom soak`: a mixed workload against a real deployment on this machine while a nemesis injects
faults at seeded random moments, then invariants checked over the whole history.

- `deployment`: the product as an operator runs it (`cleanroom serve` on a seeded demo database), which
  the nemesis can kill and the soak restarts.
- `workload`: an assistant (a bearer token) and a person (a session) doing what they do: proposals of
  every kind of run, approvals, rejections, action items accepted and rejected, follow-ups, a schedule and
  a two-step flow. Every request's outcome goes into the history, including "no answer" (the API was down).
- `nemesis`: kill -9 of the API, of its worker process; the data disk filled to a few MB free; and, only when
  named in --faults, what the machine shares (libvirtd; the soak's own PostgreSQL cluster, nothing else).
- `invariants`: what must hold afterwards, read from the database, the audit trail and libvirt.
"""
