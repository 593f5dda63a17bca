from backend.settings import get_settings
from console import storage

storage.prepare(get_settings())  # before NiceGUI is imported: it reads its storage path once, on import

from console.main import run  # noqa: E402

run()
