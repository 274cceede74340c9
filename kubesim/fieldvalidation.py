"""Unknown fields of custom resources: pruning and the fieldValidation query parameter.

Modelled on:
- k8s.io/apiextensions-apiserver/pkg/apiserver/schema/pruning/algorithm.go: a field the
  CRD's structural schema does not declare is pruned (dropped before storage), unless the
  schema node has `x-kubernetes-preserve-unknown-fields: true`; a property is named
  `.name`, an additionalProperties key `[key]` in the path, which starts without a dot
  (`spec.launcherCreationPolicy`). ObjectMeta, apiVersion and kind of the root are never
  pruned; `status` is the status subresource's.
- k8s.io/apiserver/pkg/endpoints/handlers/create.go and fieldmanager (KEP-2885,
  "Server Side Unknown Field Validation", GA in 1.27): `fieldValidation=Strict` turns each
  unknown field into a 400 BadRequest, `<Kind> in version "<v>" cannot be handled as a
  <Kind>: strict decoding error: unknown field "spec.x", unknown field "spec.y"`
  (runtime.NewStrictDecodingError joins them with ", "); `Warn` (the default when the
  parameter is absent) drops them and answers one `Warning` header per field,
  `unknown field "spec.x"`; `Ignore` drops them silently.
"""

from __future__ import annotations

from . import errors

MODES = ("Strict", "Warn", "Ignore")


def unknown_fields(value, schema: dict | None, path: str) -> list[str]:
    """The paths of fields in `value` that `schema` does not declare, pruning them from
    `value` as the API server does (algorithm.go's prune)."""
    if not isinstance(schema, dict) or schema.get("x-kubernetes-preserve-unknown-fields"):
        return []
    out: list[str] = []
    if isinstance(value, dict):
        props = schema.get("properties")
        extra = schema.get("additionalProperties")
        if props is None and extra is None:
            return []
        for key in list(value):
            if props is not None and key in props:
                out += unknown_fields(value[key], props[key], f"{path}.{key}" if path else key)
            elif isinstance(extra, dict):
                out += unknown_fields(value[key], extra, f"{path}[{key}]")
            elif extra is True:
                continue
            else:
                out.append(f"{path}.{key}" if path else key)
                del value[key]
    elif isinstance(value, list) and isinstance(schema.get("items"), dict):
        for i, item in enumerate(value):
            out += unknown_fields(item, schema["items"], f"{path}[{i}]")
    return out


def served_schema(crd: dict, version: str) -> dict | None:
    for v in (crd.get("spec") or {}).get("versions") or []:
        if v.get("name") == version:
            return ((v.get("schema") or {}).get("openAPIV3Schema")) or None
    return None


def validate(rt, obj: dict, crd: dict | None, mode: str | None) -> list[str]:
    """Prune `obj` (a custom resource) by its CRD's schema; raise for Strict, return the
    warnings for Warn. `mode` None is the server's default, Warn."""
    mode = mode or "Warn"
    if mode not in MODES:
        raise errors.bad_request(f'fieldValidation must be one of "Ignore", "Warn" or '
                                 f'"Strict", got "{mode}"')
    schema = served_schema(crd, rt.version) if crd else None
    if schema is None:
        return []
    props = schema.get("properties") or {}
    found: list[str] = []
    for key in [k for k in obj if k not in ("apiVersion", "kind", "metadata", "status")]:
        if schema.get("x-kubernetes-preserve-unknown-fields"):
            break
        if key in props:
            found += unknown_fields(obj[key], props[key], key)
        else:
            found.append(key)
            del obj[key]
    if not found:
        return []
    # Go's map order is random; the paths are reported sorted (deterministic here).
    texts = [f'unknown field "{p}"' for p in sorted(found)]
    if mode == "Strict":
        raise errors.bad_request(f'{rt.kind} in version "{rt.version}" cannot be handled as a '
                                 f'{rt.kind}: strict decoding error: {", ".join(texts)}')
    return texts if mode == "Warn" else []
