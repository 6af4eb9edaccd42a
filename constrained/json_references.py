"""Where the schemas of a JSON Schema are, and what each ``$ref`` names.

The schema document and the other documents the user passes (``json_schema(...,
documents={uri: schema})``) are walked once, keyword by keyword, to record every
schema's base URI (``$id`` changes it, relative to the enclosing one), every
embedded resource (a schema with its own ``$id``) and every ``$anchor``. A
``$ref`` is then resolved against its schema's base URI (RFC 3986) to a resource
and a JSON pointer or anchor within it. A ``$dynamicRef`` also depends on the
*dynamic scope*, the resources evaluation went through to reach it: json_schema
carries that scope along (enter()) as the outermost ``$dynamicAnchor`` of each
name, so a schema reached in different scopes is a different node.

A *location* names one schema: its JSON pointer in the schema document (``""``
is the root, ``"/$defs/a"``...), or ``uri#pointer`` in another document.
"""

from urllib.parse import unquote, urldefrag, urljoin, urlsplit

from .errors import ConstrainedError

ROOT_URI = "https://constrained.invalid/schema.json"  # the base URI of a document without $id
METASCHEMA_HOST = "json-schema.org"

# Keywords whose values hold schemas: by name, in a list, or the value itself.
_SCHEMA_MAPS = ("properties", "patternProperties", "$defs", "definitions", "dependentSchemas", "dependencies")
_SCHEMA_LISTS = ("items", "prefixItems", "allOf", "anyOf", "oneOf")
_SCHEMAS = ("items", "additionalItems", "additionalProperties", "contains", "propertyNames", "not", "if", "then",
            "else", "unevaluatedItems", "unevaluatedProperties")


def escape(token) -> str:
    """A JSON pointer token."""
    return str(token).replace("~", "~0").replace("/", "~1")


def _tokens(pointer: str) -> list:
    """The unescaped tokens of a JSON pointer."""
    return [token.replace("~1", "/").replace("~0", "~") for token in pointer.split("/")[1:]]


def where(location: str) -> str:
    return location or "the schema root"


class Documents:
    """The schema document and the other documents, by URI."""

    def __init__(self, document, others=None):
        self._documents = {"": document} | {f"{uri}#": schema for uri, schema in _checked(others).items()}
        self._bases: dict = {}  # location -> its schema's base URI (its own $id applied)
        self._resources: dict = {}  # URI without fragment -> location of the resource's root
        self._anchors: dict = {}  # (URI, anchor) -> location
        self._dynamic_anchors: set = set()  # (URI, anchor) of the $dynamicAnchors
        self._dynamic_names: set = set()  # the anchor names $dynamicRefs use
        self._index(document, "", ROOT_URI)
        self._resources.setdefault(ROOT_URI, "")
        for root in self._documents:
            if root:  # addressed by the URI it is passed under, whatever its $id says
                self._resources.setdefault(root[:-1], root)
                self._index(self._documents[root], root, root[:-1])
        self._dynamic_by_resource: dict = {}  # URI -> {name: location} of the $dynamicAnchors $dynamicRefs use
        for uri, name in self._dynamic_anchors:
            if name in self._dynamic_names:
                self._dynamic_by_resource.setdefault(uri, {})[name] = self._anchors[uri, name]

    def at(self, location: str):
        """The schema (or any JSON value) at ``location``."""
        root, pointer = _split(location)
        value = self._documents[root]
        for token in _tokens(pointer):
            value = value[int(token)] if isinstance(value, list) else value[token]
        return value

    def named(self, uri: str):
        """The schema resource ``uri`` names (its fragment aside), or None."""
        location = self._resources.get(urldefrag(uri)[0])
        return None if location is None else self.at(location)

    def base(self, location: str) -> str:
        """The base URI of the schema at ``location``: what its ``$ref`` is relative to."""
        if location not in self._bases:  # a location no keyword leads to ($ref to "#/x/y"): indexed on first use
            parent = location.rsplit("/", 1)[0]
            self._index(self.at(location), location, self.base(parent))
        return self._bases[location]

    def resolve(self, ref, location: str) -> str:
        """The location of the schema that the ``$ref`` ``ref`` of the schema at ``location`` names."""
        if not isinstance(ref, str):
            raise ConstrainedError(f"malformed schema: '$ref' at {where(location)} must be a string, got {ref!r}")
        uri, fragment = urldefrag(_join(self.base(location), ref))
        if uri not in self._resources:
            raise ConstrainedError(_unknown_document(ref, location, uri))
        resource = self._resources[uri]
        fragment = unquote(fragment)
        if fragment and not fragment.startswith("/"):
            target = self._anchors.get((uri, fragment))
            if target is None:
                raise ConstrainedError(f"$ref {ref!r} at {where(location)} names an anchor {fragment!r} that no "
                                       f"schema of {uri} defines")
            return target
        target = self._follow(resource, fragment)
        root = _split(resource)[0]
        if target is None and resource != root:  # refs written from the document's root despite an embedded $id
            target = self._follow(root, fragment)
        if target is None:
            raise ConstrainedError(f"$ref {ref!r} at {where(location)} does not resolve: no schema at "
                                   f"{fragment or '/'} of {uri}")
        return target

    def resolve_dynamic(self, ref, location: str, scope: tuple):
        """The location the ``$dynamicRef`` ``ref`` at ``location`` names in the
        dynamic ``scope`` (see enter()): the outermost ``$dynamicAnchor`` of the
        fragment's name when its first target has one, else that target (as
        ``$ref``). None where the scope does not track the name (a $dynamicRef
        outside the schema keywords)."""
        target = self.resolve(ref, location)
        uri, name = urldefrag(_join(self.base(location), ref))
        name = unquote(name)
        if (uri, name) not in self._dynamic_anchors:
            return target
        if name not in self._dynamic_names:
            return None
        return dict(scope).get(name, target)

    def enter(self, scope: tuple, location: str) -> tuple:
        """The dynamic scope once evaluation reaches ``location`` from ``scope``.
        A scope binds each anchor name some $dynamicRef uses to its outermost
        $dynamicAnchor among the resources entered so far, as sorted (name,
        location) pairs: the first resource entered that defines it wins."""
        anchors = self._dynamic_by_resource.get(self.base(location))
        if not anchors or all(name in dict(scope) for name in anchors):
            return scope
        return tuple(sorted((dict(anchors) | dict(scope)).items()))

    def _follow(self, start: str, pointer: str):
        """The location of the JSON pointer ``pointer`` from ``start``, or None."""
        value, target = self.at(start), start
        for token in _tokens(pointer):
            if isinstance(value, dict) and token in value:
                value = value[token]
            elif isinstance(value, list) and token.isdigit() and int(token) < len(value):
                value = value[int(token)]
            else:
                return None
            target += "/" + escape(token)
        return target

    def _index(self, schema, location: str, base: str) -> None:
        """Record the base URIs, embedded resources and anchors of ``schema`` and its subschemas."""
        new_base = base_uri(schema, base)
        self._bases.setdefault(location, new_base)
        if not isinstance(schema, dict):
            return
        if new_base != base:
            self._resources.setdefault(new_base, location)
        for key in ("$anchor", "$dynamicAnchor"):
            if isinstance(schema.get(key), str):
                self._anchors.setdefault((new_base, schema[key]), location)
        if isinstance(schema.get("$dynamicAnchor"), str):
            self._dynamic_anchors.add((new_base, schema["$dynamicAnchor"]))
        if isinstance(schema.get("$dynamicRef"), str):
            self._dynamic_names.add(unquote(urldefrag(schema["$dynamicRef"])[1]))
        ident = schema.get("$id", schema.get("id"))
        if isinstance(ident, str) and urldefrag(ident)[1] and not urldefrag(ident)[1].startswith("/"):
            self._anchors.setdefault(urldefrag(_join(base, ident)), location)  # draft-07: "$id": "#name"
        for child, child_location in subschemas(schema, location):
            self._index(child, child_location, new_base)


def base_uri(schema, base: str) -> str:
    """The base URI inside ``schema``, whose enclosing schema's is ``base``."""
    if not isinstance(schema, dict):
        return base
    ident = schema.get("$id", schema.get("id") if "$id" not in schema else None)
    if isinstance(ident, str) and not ident.startswith("#"):
        return urldefrag(_join(base, ident))[0]
    return base


def subschemas(schema: dict, location: str):
    """(subschema, location) for every keyword whose value holds schemas."""
    for key, value in schema.items():
        here = f"{location}/{escape(key)}"
        if key in _SCHEMA_MAPS and isinstance(value, dict):
            for name, child in value.items():
                yield child, f"{here}/{escape(name)}"
        elif key in _SCHEMA_LISTS and isinstance(value, list):
            for k, child in enumerate(value):
                yield child, f"{here}/{k}"
        elif key in _SCHEMAS:
            yield value, here


def _join(base: str, ref: str) -> str:
    """``ref`` resolved against ``base``; urljoin alone drops the base of a
    fragment in schemes it does not know (``urn:``)."""
    return urldefrag(base)[0] + ref if ref.startswith("#") else urljoin(base, ref)


def _split(location: str) -> tuple[str, str]:
    """(the document's root location, the JSON pointer in it)."""
    if not location or location.startswith("/"):
        return "", location
    uri, _, pointer = location.partition("#")
    return uri + "#", pointer


def _checked(others) -> dict:
    """The user's other documents by absolute URI without fragment."""
    if others is None:
        return {}
    if not isinstance(others, dict):
        raise ConstrainedError(f"documents is a dict from URI to schema, got {type(others).__name__}")
    out = {}
    for uri, schema in others.items():
        if not isinstance(uri, str) or not urlsplit(uri).scheme or urldefrag(uri)[1]:
            raise ConstrainedError(f"documents: {uri!r} is not an absolute URI without a fragment "
                                   "(like 'https://example.com/schemas/address.json')")
        if not isinstance(schema, (dict, bool)):
            raise ConstrainedError(f"documents[{uri!r}] is not a schema (a dict or a bool), got "
                                   f"{type(schema).__name__}")
        out[urldefrag(uri)[0]] = schema
    return out


def _unknown_document(ref: str, location: str, uri: str) -> str:
    if urlsplit(uri).hostname == METASCHEMA_HOST:
        return (f"$ref {ref!r} at {where(location)} names the JSON Schema metaschema {uri}, which json_schema "
                "does not have (it fetches nothing): refer to a schema of your own instead")
    return (f"$ref {ref!r} at {where(location)} names the remote schema {uri}, which json_schema was not given: "
            f"pass it as json_schema(schema, documents={{{uri!r}: <that schema>}}), or copy it under $defs")
