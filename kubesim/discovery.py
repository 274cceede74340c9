"""Discovery documents (/api, /apis, APIResourceList) built from the live registry."""

from __future__ import annotations

from .resources import ALL_VERBS

_SUB_VERBS = {"status": ["get", "patch", "update"], "log": ["get"], "binding": ["create"],
              "finalize": ["update"], "scale": ["get", "patch", "update"]}


def version_info(git_version: str) -> dict:
    major, minor = git_version.lstrip("v").split(".")[:2]
    return {"major": major, "minor": minor, "gitVersion": git_version,
            "gitCommit": "0" * 40, "gitTreeState": "clean", "buildDate": "2024-08-13T07:28:49Z",
            "goVersion": "go1.22.5", "compiler": "gc", "platform": "linux/amd64"}


def api_versions(address: str) -> dict:
    return {"kind": "APIVersions", "versions": ["v1"],
            "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": address}]}


def _group_doc(group: str, versions: list[str]) -> dict:
    gvs = [{"groupVersion": f"{group}/{v}", "version": v} for v in versions]
    return {"name": group, "versions": gvs, "preferredVersion": gvs[0]}


def api_group_list(registry) -> dict:
    groups = [_group_doc(g, vs) for g, vs in registry.group_versions().items() if g]
    return {"kind": "APIGroupList", "apiVersion": "v1", "groups": groups}


def api_group(registry, group: str) -> dict | None:
    vs = registry.group_versions().get(group)
    if not vs or not group:
        return None
    return {"kind": "APIGroup", "apiVersion": "v1", **_group_doc(group, vs)}


def resource_list(registry, group: str, version: str) -> dict | None:
    rts = registry.in_group_version(group, version)
    if not rts:
        return None
    resources = []
    for rt in sorted(rts, key=lambda r: r.plural):
        verbs = ["create"] if rt.key == "/bindings" else list(ALL_VERBS)
        entry = {"name": rt.plural, "singularName": rt.singular_name, "namespaced": rt.namespaced,
                 "kind": rt.kind, "verbs": verbs}
        if rt.short_names:
            entry["shortNames"] = list(rt.short_names)
        if rt.categories:
            entry["categories"] = list(rt.categories)
        resources.append(entry)
        for sub in rt.subresources:
            resources.append({"name": f"{rt.plural}/{sub}", "singularName": "",
                              "namespaced": rt.namespaced,
                              "kind": "Binding" if sub == "binding" else rt.kind,
                              "verbs": _SUB_VERBS.get(sub, ["get"])})
    gv = f"{group}/{version}" if group else version
    return {"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": gv,
            "resources": resources}
