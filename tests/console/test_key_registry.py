"""The key registry (console/keys.py): every screen and pane with keys of its own is in it,
so each key reaches the help screen and the palette from its one declaration."""

from __future__ import annotations

import importlib
import inspect
import pkgutil

from textual.binding import Binding
from textual.dom import DOMNode

import console
from console.keys import SECTIONS, bindings, help_sections


def classes_with_keys() -> set[type]:
    """Every class of the console's modules that declares described bindings itself."""
    found = set()
    for info in pkgutil.walk_packages(console.__path__, "console."):
        if info.name.endswith("__main__"):
            continue
        module = importlib.import_module(info.name)
        for _, cls in inspect.getmembers(module, inspect.isclass):
            own = cls.__dict__.get("BINDINGS")
            if cls.__module__ == info.name and issubclass(cls, DOMNode) and own and bindings(own):
                found.add(cls)
    return found


def test_every_class_with_keys_is_in_the_registry() -> None:
    registered = {keys.cls() for section in SECTIONS for keys in section.keys}
    missing = {
        c for c in classes_with_keys() - registered if not any(issubclass(r, c) for r in registered)
    }  # (a base: its keys are theirs)
    assert not missing, f"keys not in console/keys.py: {sorted(c.__name__ for c in missing)}"


def test_the_help_lists_each_registered_binding_once_under_its_section() -> None:
    sections = dict(help_sections())
    assert list(sections) == [s.title for s in SECTIONS]
    for section in SECTIONS:
        listed = sections[section.title]
        assert len(listed) == len({id(b) for b in listed})
        for keys in section.keys:
            for b in keys.cls().BINDINGS:
                if isinstance(b, Binding) and b.description:
                    assert b in listed, (section.title, b)
