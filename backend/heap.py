"""The garbage collector of an API process, set once it has started.

An API process holds a large heap that lives as long as it does (modules, the app's routes and schemas, the
pool), and CPython's full collection walks all of it: about 150 ms each, every six seconds or so, at a
thousand waiting assistants, with every request in flight stopped meanwhile. A probe of the control-plane
bench (docs/scale.md, item 15) found a fifth of the slowest twentieth of proposals inside such a pause. So,
once started: what exists is frozen out of the collector's walks (`gc.freeze`), and the youngest generation
is collected every `YOUNG` allocations instead of 700, which makes every older collection rarer in
proportion. Cyclic garbage is still collected, later.
"""

from __future__ import annotations

import gc

YOUNG = 10_000  # net allocations between two collections of the youngest generation (CPython: 700)


def settle() -> None:
    """Once the process has started: collect, freeze what is left, and collect the young less often."""
    gc.collect()
    gc.freeze()
    _, middle, old = gc.get_threshold()
    gc.set_threshold(YOUNG, middle, old)
