"""The form an MCP server asks a person to fill in (elicitation): its fields, read from the
server's flat JSON schema, and each answer typed at the terminal checked and converted.

The schema is the restricted one MCP allows: an object whose properties are strings (with
length bounds and a format), numbers and integers (with bounds), booleans, single choices (an
`enum`, or `oneOf` of `const` and `title`) and multiple choices (an array of such items). A
property of any other shape is asked as text. Answers are checked here before they are sent,
so a typo is asked again rather than refused by the server.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

_YES = ("y", "yes", "true", "1", "on")
_NO = ("n", "no", "false", "0", "off")


@dataclass(frozen=True)
class Field:
    name: str
    title: str
    kind: str  # string, number, integer, boolean, choice, choices
    required: bool = False
    description: str = ""
    default: Any = None
    options: tuple[tuple[str, str], ...] = ()  # (value, label) of a choice
    bounds: dict[str, Any] = field(default_factory=dict)  # minimum, maximum, minLength, maxLength, minItems, maxItems
    format: str = ""

    def hint(self) -> str:
        """What the prompt says it takes."""
        if self.kind in ("choice", "choices"):
            listed = ", ".join(f"{i}={label}" for i, (_, label) in enumerate(self.options, 1))
            return listed + ("; several, separated by commas" if self.kind == "choices" else "")
        if self.kind == "boolean":
            return "y/n"
        extra = [f"{k} {v}" for k, v in self.bounds.items()]
        return ", ".join([self.format or self.kind, *extra])

    def default_text(self) -> str:
        """The default as the person would type it."""
        if self.default is None:
            return ""
        if self.kind == "boolean":
            return "y" if self.default else "n"
        if self.kind == "choices" and isinstance(self.default, list):
            return ", ".join(str(v) for v in self.default)
        return str(self.default)

    def read(self, text: str) -> tuple[Any, str | None]:
        """(the value to send, None) or (None, what is wrong). An optional field left empty is
        (None, None): it is left out of the answer."""
        text = text.strip()
        if not text:
            return (None, None) if not self.required else (None, f"{self.title} is required")
        if self.kind == "boolean":
            if text.lower() in _YES:
                return True, None
            if text.lower() in _NO:
                return False, None
            return None, "answer y or n"
        if self.kind in ("integer", "number"):
            try:
                number: int | float = int(text) if self.kind == "integer" else float(text)
            except ValueError:
                return None, f"{self.title} takes {'a whole number' if self.kind == 'integer' else 'a number'}"
            if "minimum" in self.bounds and number < self.bounds["minimum"]:
                return None, f"{self.title} is at least {self.bounds['minimum']}"
            if "maximum" in self.bounds and number > self.bounds["maximum"]:
                return None, f"{self.title} is at most {self.bounds['maximum']}"
            return number, None
        if self.kind == "choice":
            value = self._option(text)
            return (value, None) if value is not None else (None, f"pick one of {self.hint()}")
        if self.kind == "choices":
            picked = [self._option(part.strip()) for part in text.split(",") if part.strip()]
            if any(v is None for v in picked):
                return None, f"pick from {self.hint()}"
            values = list(dict.fromkeys(v for v in picked if v is not None))
            if "minItems" in self.bounds and len(values) < self.bounds["minItems"]:
                return None, f"pick at least {self.bounds['minItems']}"
            if "maxItems" in self.bounds and len(values) > self.bounds["maxItems"]:
                return None, f"pick at most {self.bounds['maxItems']}"
            return values, None
        if "minLength" in self.bounds and len(text) < self.bounds["minLength"]:
            return None, f"{self.title} has at least {self.bounds['minLength']} characters"
        if "maxLength" in self.bounds and len(text) > self.bounds["maxLength"]:
            return None, f"{self.title} has at most {self.bounds['maxLength']} characters"
        return text, None

    def _option(self, text: str) -> str | None:
        if text.isdigit() and 1 <= int(text) <= len(self.options):
            return self.options[int(text) - 1][0]
        for value, label in self.options:
            if text in (value, label) or text.lower() in (value.lower(), label.lower()):
                return value
        return None


def fields(schema: dict[str, Any]) -> list[Field]:
    """The form's fields, in the schema's order."""
    props = schema.get("properties")
    required = set(schema.get("required") or ())
    out: list[Field] = []
    for name, spec in (props.items() if isinstance(props, dict) else ()):
        spec = spec if isinstance(spec, dict) else {}
        title = str(spec.get("title") or name)
        kind, options = _kind(spec)
        bounds = {k: spec[k] for k in ("minimum", "maximum", "minLength", "maxLength", "minItems", "maxItems")
                  if isinstance(spec.get(k), (int, float)) and not isinstance(spec.get(k), bool)}
        out.append(Field(name=str(name), title=title, kind=kind, required=name in required,
                         description=str(spec.get("description") or ""), default=spec.get("default"),
                         options=options, bounds=bounds, format=str(spec.get("format") or "")))
    return out


def _kind(spec: dict[str, Any]) -> tuple[str, tuple[tuple[str, str], ...]]:
    if spec.get("type") == "array":
        items = spec.get("items")
        options = _options(items) if isinstance(items, dict) else ()
        return ("choices", options) if options else ("string", ())
    options = _options(spec)
    if options:
        return "choice", options
    kind = spec.get("type")
    return (str(kind), ()) if kind in ("string", "number", "integer", "boolean") else ("string", ())


def _options(spec: dict[str, Any]) -> tuple[tuple[str, str], ...]:
    enum = spec.get("enum")
    if isinstance(enum, list):
        given = spec.get("enumNames")
        names = given if isinstance(given, list) else []
        return tuple((str(v), str(names[i]) if i < len(names) else str(v)) for i, v in enumerate(enum))
    for key in ("oneOf", "anyOf"):
        if isinstance(spec.get(key), list):
            return tuple((str(o.get("const")), str(o.get("title") or o.get("const"))) for o in spec[key]
                         if isinstance(o, dict) and "const" in o)
    return ()
