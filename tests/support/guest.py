"""The guest agent (vm_templates' cleanroom-agent) loaded as a module, for tests that run it without a VM."""

from __future__ import annotations

import importlib.machinery
import importlib.util
from types import ModuleType

from backend.settings import REPO_ROOT

AGENT_PATH = REPO_ROOT / "vm_templates" / "image" / "cleanroom-agent"


def load_guest_agent() -> ModuleType:
    loader = importlib.machinery.SourceFileLoader("cleanroom_agent", str(AGENT_PATH))
    spec = importlib.util.spec_from_loader("cleanroom_agent", loader)
    assert spec is not None
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)  # __name__ is not "__main__": nothing boots, mounts or powers off
    return module
