"""A mypy plugin for what Piccolo's metaclass does at run time and its types do not say: every table without a
declared primary key gets `id = Serial(primary_key=True)` (piccolo/table.py, `Table.__init_subclass__`). With it,
`Run.id` is a `Serial` column on the class and an `int` on a row, as Piccolo's `Serial.__get__` overloads say.
Listed in pyproject.toml's [tool.mypy] plugins; scripts/typecheck runs mypy."""

from __future__ import annotations

from collections.abc import Callable

from mypy.nodes import Var
from mypy.plugin import ClassDefContext, Plugin
from mypy.plugins.common import add_attribute_to_class

TABLE = "piccolo.table.Table"
SERIAL = "piccolo.columns.column_types.Serial"


def _primary_key(ctx: ClassDefContext) -> None:
    info = ctx.cls.info
    if any("id" in base.names for base in info.mro[:-1] if base.fullname != TABLE):
        return  # declared (or inherited from another table class)
    serial = ctx.api.named_type(SERIAL) if ctx.api.lookup_fully_qualified_or_none(SERIAL) else None
    if serial is None:
        return
    add_attribute_to_class(ctx.api, ctx.cls, "id", serial)
    node = info.names["id"].node
    if isinstance(node, Var):
        node.is_classvar = False  # a descriptor: the column on the class, its value on a row


class PiccoloPlugin(Plugin):
    def get_base_class_hook(self, fullname: str) -> Callable[[ClassDefContext], None] | None:
        return _primary_key if fullname == TABLE else None


def plugin(version: str) -> type[Plugin]:
    return PiccoloPlugin
