import os

from backend.settings import get_settings
from console import storage
from console.watch import leave_with_parent

storage.prepare(get_settings())  # before NiceGUI is imported: it reads its storage path once, on import
leave_with_parent(os.environ.get("CLEANROOM_CONSOLE_PARENT"))

from console.main import run  # noqa: E402

run()
