"""Flows: an ordered list of steps the assistant proposes together and a person approves once. Each step is
a run of its own (one fresh VM, its own staged bundle and hashes, its own capability); step k receives the
conclusions of steps 1..k-1 and the outputs it named, read-only at /work/flow, and nothing else of theirs."""
