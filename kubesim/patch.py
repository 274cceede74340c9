"""PATCH bodies: JSON merge patch (RFC 7386), strategic merge patch, JSON patch (RFC 6902)."""

from __future__ import annotations

import json

from . import errors
from .util import deepcopy

JSON_PATCH = "application/json-patch+json"
MERGE_PATCH = "application/merge-patch+json"
STRATEGIC = "application/strategic-merge-patch+json"
APPLY = "application/apply-patch+yaml"
APPLY_CBOR = "application/apply-patch+cbor"

# patchMergeKey for the list fields a launcher is likely to patch; others are replaced.
_MERGE_KEYS = {"containers": "name", "initContainers": "name", "ephemeralContainers": "name",
               "volumes": "name", "env": "name", "volumeMounts": "mountPath",
               "conditions": "type", "ownerReferences": "uid", "imagePullSecrets": "name",
               "hostAliases": "ip", "topologySpreadConstraints": "topologyKey",
               "envFrom": None, "tolerations": None, "args": None, "command": None}
_SET_LISTS = {"finalizers"}


def merge_patch(target, patch):
    if not isinstance(patch, dict):
        return deepcopy(patch)
    result = dict(target) if isinstance(target, dict) else {}
    for k, v in patch.items():
        if v is None:
            result.pop(k, None)
        else:
            result[k] = merge_patch(result.get(k), v)
    return result


def strategic_merge(target, patch):
    if not isinstance(patch, dict):
        return deepcopy(patch)
    directive = patch.get("$patch")
    if directive == "replace":
        return {k: deepcopy(v) for k, v in patch.items() if k != "$patch"}
    if directive == "delete":
        return None
    result = dict(target) if isinstance(target, dict) else {}
    for k, v in patch.items():
        if k.startswith("$deleteFromPrimitiveList/"):
            field = k.split("/", 1)[1]
            result[field] = [x for x in result.get(field) or [] if x not in (v or [])]
            continue
        if k.startswith("$"):
            continue  # $setElementOrder, $retainKeys: ordering/pruning hints we can ignore
        if v is None:
            result.pop(k, None)
        elif isinstance(v, dict):
            merged = strategic_merge(result.get(k), v)
            if merged is None:
                result.pop(k, None)
            else:
                result[k] = merged
        elif isinstance(v, list):
            result[k] = _merge_list(k, result.get(k), v)
        else:
            result[k] = v
    return result


def _merge_list(field: str, cur, patch: list):
    if field in _SET_LISTS:
        out = list(cur or [])
        out += [x for x in patch if x not in out]
        return out
    key = _MERGE_KEYS.get(field)
    if field == "ports":
        key = "containerPort" if any("containerPort" in (p or {}) for p in patch) else "port"
    if key is None or not isinstance(cur, list) or not all(isinstance(x, dict) for x in patch):
        return [x for x in deepcopy(patch) if not (isinstance(x, dict) and x.get("$patch"))]
    out = list(cur)
    for item in patch:
        idx = next((i for i, x in enumerate(out)
                    if isinstance(x, dict) and key in item and x.get(key) == item.get(key)), None)
        if item.get("$patch") == "delete":
            if idx is not None:
                out.pop(idx)
        elif idx is not None:
            out[idx] = strategic_merge(out[idx], item)
        else:
            out.append({k: v for k, v in item.items() if k != "$patch"})
    return out


def _pointer(path: str) -> list[str]:
    if path == "":
        return []
    if not path.startswith("/"):
        raise _patch_error(f"invalid JSON pointer {path!r}")
    return [p.replace("~1", "/").replace("~0", "~") for p in path[1:].split("/")]


def _patch_error(msg: str) -> errors.ApiError:
    return errors.ApiError(422, "Invalid", msg, {})


def _parent(doc, tokens: list[str], path: str):
    cur = doc
    for t in tokens[:-1]:
        if isinstance(cur, dict) and t in cur:
            cur = cur[t]
        elif isinstance(cur, list) and t.isdigit() and int(t) < len(cur):
            cur = cur[int(t)]
        else:
            raise _patch_error(f"jsonpatch operation does not apply: doc is missing path: {path}")
    return cur


def json_patch(doc, ops):
    if not isinstance(ops, list):
        raise errors.bad_request("json patch must be a list of operations")
    doc = deepcopy(doc)
    for op in ops:
        kind, path = op.get("op"), op.get("path", "")
        if kind in ("move", "copy"):
            src = _get(doc, _pointer(op.get("from", "")), op.get("from", ""))
            if kind == "move":
                doc = _remove(doc, _pointer(op["from"]), op["from"])
            doc = _add(doc, _pointer(path), deepcopy(src), path)
        elif kind == "add":
            doc = _add(doc, _pointer(path), deepcopy(op.get("value")), path)
        elif kind == "remove":
            doc = _remove(doc, _pointer(path), path)
        elif kind == "replace":
            _get(doc, _pointer(path), path)
            doc = _remove(doc, _pointer(path), path)
            doc = _add(doc, _pointer(path), deepcopy(op.get("value")), path)
        elif kind == "test":
            if _get(doc, _pointer(path), path) != op.get("value"):
                raise _patch_error(f"testing value {path} failed: test failed")
        else:
            raise _patch_error(f"Unexpected kind: {kind}")
    return doc


def _get(doc, tokens, path):
    if not tokens:
        return doc
    parent = _parent(doc, tokens, path)
    t = tokens[-1]
    if isinstance(parent, dict) and t in parent:
        return parent[t]
    if isinstance(parent, list) and t.isdigit() and int(t) < len(parent):
        return parent[int(t)]
    raise _patch_error(f"jsonpatch operation does not apply: doc is missing key: {path}")


def _add(doc, tokens, value, path):
    if not tokens:
        return value
    parent = _parent(doc, tokens, path)
    t = tokens[-1]
    if isinstance(parent, dict):
        parent[t] = value
    elif isinstance(parent, list):
        if t == "-":
            parent.append(value)
        elif t.isdigit() and int(t) <= len(parent):
            parent.insert(int(t), value)
        else:
            raise _patch_error(f"add operation does not apply: doc is missing path: {path}")
    else:
        raise _patch_error(f"add operation does not apply: doc is missing path: {path}")
    return doc


def _remove(doc, tokens, path):
    parent = _parent(doc, tokens, path)
    t = tokens[-1] if tokens else None
    if isinstance(parent, dict) and t in parent:
        del parent[t]
    elif isinstance(parent, list) and t is not None and t.isdigit() and int(t) < len(parent):
        parent.pop(int(t))
    else:
        raise _patch_error(f"jsonpatch remove operation does not apply: doc is missing path: "
                           f"{path}")
    return doc


def decode(body: bytes, content_type: str):
    if content_type == APPLY:
        try:
            import yaml
        except ImportError:  # JSON is YAML; without PyYAML accept JSON only
            return json.loads(body or b"{}")
        return yaml.safe_load(body or b"{}")
    try:
        return json.loads(body or b"null")
    except json.JSONDecodeError as e:
        raise errors.bad_request(f"error decoding patch: {e}") from None
