#!/usr/bin/env python3
"""check_chart.py - the Tugboat chart's test: renders the chart with several value sets
and checks every rendered object against the Kubernetes API schema (strict: an unknown
field fails) and against the properties the chart promises:

  - both containers non-root, read-only root filesystem, every capability dropped, no
    privilege escalation, seccomp RuntimeDefault (with the documented exceptions of the
    low-port modes: root haproxy, or a setcap'ed haproxy image);
  - the service account token mounted into the controller container only;
  - the official haproxy image with exactly `-W -db -S <socket>,mode,600 -f /etc/haproxy`,
    and its image tag changing the haproxy container's image and nothing else;
  - probes on the right containers and ports, flags that agree with the ports, names and
    objects they refer to, least-privilege RBAC;
  - a Deployment or a DaemonSet (no replicas; hostNetwork with ClusterFirstWithHostNet,
    or hostPorts mapping 80/443 and each TCP service's or Gateway listener's port P to
    its bind at P + 10000), and those ports on the Service;
  - misspelled or invalid values rejected; deploy/manifests/tugboat.yaml in sync.

It also runs itself on broken renders (a token mounted into haproxy, a writable root
filesystem, an unknown field, ...) and requires those to fail, so that a check that can
no longer fail is noticed.

Run by scripts/test-chart.sh, which provides helm and the Python packages
(kubernetes-validate, which ships the Kubernetes JSON schemas, PyYAML, jsonschema).
Prints one line per failed check and a closing "chart: N passed, M failed" line; exits
non-zero on any failure.
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import jsonschema
import kubernetes_validate
import yaml

ROOT = Path(__file__).resolve().parents[3]
CHART = ROOT / "deploy" / "helm" / "tugboat"
MANIFESTS = ROOT / "deploy" / "manifests" / "tugboat.yaml"
RENDER_MANIFESTS = ROOT / "scripts" / "render-manifests.sh"
EXAMPLES = ROOT / "examples" / "helm"
# The Grafana dashboards: one source in the chart, which deploy/grafana/ links to.
DASHBOARDS = CHART / "dashboards"
GRAFANA = ROOT / "deploy" / "grafana"
RELEASE = "tugboat"
NAMESPACE = "tugboat"
# The Kubernetes API the schemas come from: the version the controller is built against.
KUBE_VERSION = "1.33"

SOCKET = "/var/run/haproxy/master.sock"
SA_PATH = "/var/run/secrets/kubernetes.io/serviceaccount"
CLUSTER_SCOPED = {"ClusterRole", "ClusterRoleBinding", "IngressClass", "Namespace"}


# --------------------------------------------------------------------------- results


class Results:
    """Counts named checks; remembers the failures with their details."""

    def __init__(self) -> None:
        self.passed = 0
        self.failures: list[str] = []

    def check(self, name: str, ok: bool, detail: str = "") -> bool:
        if ok:
            self.passed += 1
        else:
            self.failures.append(f"{name}: {detail}" if detail else name)
        return ok


# --------------------------------------------------------------------------- helm


def helm(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [os.environ.get("HELM", "helm"), *args], capture_output=True, text=True
    )


def deep_merge(base: dict, over: dict) -> dict:
    out = copy.deepcopy(base)
    for key, value in over.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = deep_merge(out[key], value)
        else:
            out[key] = copy.deepcopy(value)
    return out


def render(values: dict) -> tuple[subprocess.CompletedProcess, list[dict]]:
    """helm template with the given values (written to a file, as a user would)."""
    with tempfile.NamedTemporaryFile("w", suffix=".yaml", delete=False) as f:
        yaml.safe_dump(values, f)
        path = f.name
    try:
        proc = helm("template", RELEASE, str(CHART), "--namespace", NAMESPACE, "-f", path)
    finally:
        os.unlink(path)
    objs = []
    if proc.returncode == 0:
        objs = [o for o in yaml.safe_load_all(proc.stdout) if o]
    return proc, objs


def lint(values: dict) -> subprocess.CompletedProcess:
    with tempfile.NamedTemporaryFile("w", suffix=".yaml", delete=False) as f:
        yaml.safe_dump(values, f)
        path = f.name
    try:
        return helm("lint", "--strict", str(CHART), "--namespace", NAMESPACE, "-f", path)
    finally:
        os.unlink(path)


# --------------------------------------------------------------------------- schema

# ServiceMonitor is a custom resource; its schema is not part of the Kubernetes API.
# The fields the chart writes are checked here, strictly, as the CRD types them.
SERVICE_MONITOR_SCHEMA = {
    "type": "object",
    "additionalProperties": False,
    "required": ["apiVersion", "kind", "metadata", "spec"],
    "properties": {
        "apiVersion": {"const": "monitoring.coreos.com/v1"},
        "kind": {"const": "ServiceMonitor"},
        "metadata": {
            "type": "object",
            "additionalProperties": False,
            "required": ["name", "namespace"],
            "properties": {
                "name": {"type": "string"},
                "namespace": {"type": "string"},
                "labels": {"type": "object", "additionalProperties": {"type": "string"}},
            },
        },
        "spec": {
            "type": "object",
            "additionalProperties": False,
            "required": ["selector", "endpoints"],
            "properties": {
                "selector": {
                    "type": "object",
                    "additionalProperties": False,
                    "properties": {
                        "matchLabels": {
                            "type": "object",
                            "additionalProperties": {"type": "string"},
                        }
                    },
                },
                "namespaceSelector": {
                    "type": "object",
                    "additionalProperties": False,
                    "properties": {
                        "matchNames": {"type": "array", "items": {"type": "string"}},
                        "any": {"type": "boolean"},
                    },
                },
                "endpoints": {
                    "type": "array",
                    "minItems": 1,
                    "items": {
                        "type": "object",
                        "additionalProperties": False,
                        "required": ["port"],
                        "properties": {
                            "port": {"type": "string"},
                            "path": {"type": "string"},
                            "interval": {"type": "string", "pattern": "^(0|(([0-9]+)h)?(([0-9]+)m)?(([0-9]+)s)?(([0-9]+)ms)?)$"},
                        },
                    },
                },
            },
        },
    },
}


# The Gateway API kinds of examples/gateway/ (CRDs, not in the Kubernetes schemas): the
# fields of the standard channel (v1.2) that the examples may use, unknown fields refused.
def _obj(props: dict, required: list[str] | None = None) -> dict:
    return {"type": "object", "additionalProperties": False, "properties": props,
            "required": required or []}


_STR = {"type": "string"}
_INT = {"type": "integer"}
_META = _obj({"name": _STR, "namespace": _STR, "labels": {"type": "object"},
              "annotations": {"type": "object"}}, ["name"])
_REF = _obj({"group": _STR, "kind": _STR, "name": _STR, "namespace": _STR}, ["name"])
_PATH_MOD = _obj({"type": {"enum": ["ReplaceFullPath", "ReplacePrefixMatch"]},
                  "replaceFullPath": _STR, "replacePrefixMatch": _STR}, ["type"])
_HEADERS = _obj({"set": {"type": "array"}, "add": {"type": "array"}, "remove": {"type": "array"}})
_VALUE_MATCH = {"type": "array", "items": _obj({"type": {"enum": ["Exact", "RegularExpression"]},
                                                "name": _STR, "value": _STR}, ["name", "value"])}


def _gateway_api(kind: str, version: str, spec: dict) -> dict:
    return _obj({"apiVersion": {"const": f"gateway.networking.k8s.io/{version}"},
                 "kind": {"const": kind}, "metadata": _META, "spec": spec},
                ["apiVersion", "kind", "metadata", "spec"])


GATEWAY_API_SCHEMAS = {
    "GatewayClass": _gateway_api("GatewayClass", "v1", _obj(
        {"controllerName": _STR, "description": _STR, "parametersRef": {"type": "object"}},
        ["controllerName"])),
    "Gateway": _gateway_api("Gateway", "v1", _obj({
        "gatewayClassName": _STR,
        "addresses": {"type": "array"},
        "listeners": {"type": "array", "minItems": 1, "items": _obj({
            "name": _STR, "hostname": _STR, "port": _INT,
            "protocol": {"enum": ["HTTP", "HTTPS", "TLS", "TCP", "UDP"]},
            "tls": _obj({"mode": {"enum": ["Terminate", "Passthrough"]},
                         "certificateRefs": {"type": "array", "items": _REF},
                         "options": {"type": "object"}}),
            "allowedRoutes": _obj({
                "namespaces": _obj({"from": {"enum": ["All", "Same", "Selector"]},
                                    "selector": {"type": "object"}}),
                "kinds": {"type": "array", "items": _obj({"group": _STR, "kind": _STR}, ["kind"])},
            }),
        }, ["name", "port", "protocol"])},
    }, ["gatewayClassName", "listeners"])),
    "HTTPRoute": _gateway_api("HTTPRoute", "v1", _obj({
        "parentRefs": {"type": "array", "items": _obj(
            {"group": _STR, "kind": _STR, "namespace": _STR, "name": _STR,
             "sectionName": _STR, "port": _INT}, ["name"])},
        "hostnames": {"type": "array", "items": _STR},
        "rules": {"type": "array", "items": _obj({
            "name": _STR,
            "matches": {"type": "array", "items": _obj({
                "path": _obj({"type": {"enum": ["Exact", "PathPrefix", "RegularExpression"]},
                              "value": _STR}),
                "headers": _VALUE_MATCH, "queryParams": _VALUE_MATCH, "method": _STR})},
            "filters": {"type": "array", "items": _obj({
                "type": _STR, "requestHeaderModifier": _HEADERS,
                "responseHeaderModifier": _HEADERS,
                "requestRedirect": _obj({"scheme": _STR, "hostname": _STR, "path": _PATH_MOD,
                                         "port": _INT, "statusCode": _INT}),
                "urlRewrite": _obj({"hostname": _STR, "path": _PATH_MOD}),
            }, ["type"])},
            "backendRefs": {"type": "array", "items": _obj(
                {"group": _STR, "kind": _STR, "name": _STR, "namespace": _STR, "port": _INT,
                 "weight": _INT}, ["name"])},
            "timeouts": _obj({"request": _STR, "backendRequest": _STR}),
        })},
    })),
    "ReferenceGrant": _gateway_api("ReferenceGrant", "v1beta1", _obj({
        "from": {"type": "array", "minItems": 1, "items": _obj(
            {"group": _STR, "kind": _STR, "namespace": _STR}, ["group", "kind", "namespace"])},
        "to": {"type": "array", "minItems": 1, "items": _obj(
            {"group": _STR, "kind": _STR, "name": _STR}, ["group", "kind"])},
    }, ["from", "to"])),
}


def schema_errors(obj: dict) -> list[str]:
    """Strict validation against the Kubernetes API schema (unknown fields fail)."""
    if obj.get("kind") == "ServiceMonitor":
        errs = jsonschema.Draft7Validator(SERVICE_MONITOR_SCHEMA).iter_errors(obj)
        return [f"{'.'.join(map(str, e.path))}: {e.message}" for e in errs]
    if str(obj.get("apiVersion", "")).startswith("gateway.networking.k8s.io/"):
        schema = GATEWAY_API_SCHEMAS.get(obj.get("kind"))
        if schema is None:
            return [f"no schema for {obj.get('kind')}"]
        errs = jsonschema.Draft7Validator(schema).iter_errors(obj)
        return [f"{'.'.join(map(str, e.path))}: {e.message}" for e in errs]
    try:
        kubernetes_validate.validate(obj, KUBE_VERSION, strict=True)
    except kubernetes_validate.ValidationError as e:
        return [f"{'.'.join(map(str, e.path))}: {e.message}"]
    except kubernetes_validate.SchemaNotFoundError as e:
        return [e.message]
    return []


# --------------------------------------------------------------------------- helpers


def by_kind(objs: list[dict], kind: str) -> list[dict]:
    return [o for o in objs if o.get("kind") == kind]


def one(objs: list[dict], kind: str) -> dict:
    found = by_kind(objs, kind)
    return found[0] if len(found) == 1 else {}


def workload(objs: list[dict]) -> dict:
    """The one Deployment or DaemonSet that runs the pod."""
    found = by_kind(objs, "Deployment") + by_kind(objs, "DaemonSet")
    return found[0] if len(found) == 1 else {}


def pod_spec(objs: list[dict]) -> dict:
    return workload(objs).get("spec", {}).get("template", {}).get("spec", {})


# haproxy binds a user's port P (a TCP service's, a Gateway listener's) at P + 10000
# (crates/tugboat-model/src/ports.rs).
BIND_PORT_OFFSET = 10000


def user_ports(values: dict) -> dict[str, int]:
    """The ports beyond HTTP and HTTPS the values open: port name -> the user's port."""
    ports = {f"tcp-{p}": int(p) for p in values["tcpServices"]}
    if values["gatewayApi"]["enabled"]:
        ports.update({f"listener-{p}": int(p) for p in values["gatewayApi"]["listenerPorts"]})
    return ports


def name_of(o: dict) -> str:
    return f"{o.get('kind')}/{o.get('metadata', {}).get('name')}"


def container(pod: dict, name: str) -> dict:
    for c in pod.get("containers", []) + pod.get("initContainers", []):
        if c.get("name") == name:
            return c
    return {}


def port_of(c: dict, name: str):
    for p in c.get("ports", []):
        if p.get("name") == name:
            return p.get("containerPort")
    return None


def flags(args: list[str]) -> dict[str, list[str]]:
    """--key=value arguments as key -> [values]; bare --flag as key -> [""]."""
    out: dict[str, list[str]] = {}
    for a in args:
        if a.startswith("--"):
            key, _, value = a[2:].partition("=")
            out.setdefault(key, []).append(value)
    return out


def flag(args: list[str], key: str):
    values = flags(args).get(key)
    return values[0] if values and len(values) == 1 else None


def effective(c: dict, pod_sc: dict, key: str):
    sc = c.get("securityContext", {})
    return sc[key] if key in sc else pod_sc.get(key)


def mounts(c: dict) -> dict[str, dict]:
    return {m["mountPath"]: m for m in c.get("volumeMounts", [])}


def secret_bearing_volumes(pod: dict) -> set[str]:
    """Volumes that carry credentials: a service account token or a Secret."""
    names = set()
    for v in pod.get("volumes", []):
        if "secret" in v:
            names.add(v["name"])
        for src in v.get("projected", {}).get("sources", []):
            if "serviceAccountToken" in src or "secret" in src:
                names.add(v["name"])
    return names


# --------------------------------------------------------------------------- checks


def check_render(r: Results, label: str, values: dict, objs: list[dict]) -> None:
    """Every property of one rendered value set."""
    t = lambda name, ok, detail="": r.check(f"[{label}] {name}", ok, detail)  # noqa: E731

    t("renders objects", len(objs) > 0)
    for o in objs:
        errs = schema_errors(o)
        t(f"schema {name_of(o)}", not errs, "; ".join(errs))
        md = o.get("metadata", {})
        if o.get("kind") in CLUSTER_SCOPED:
            t(f"{name_of(o)} cluster-scoped, no namespace", "namespace" not in md)
        elif is_dashboards(o):
            t(f"{name_of(o)} in grafana.dashboards.namespace, else the release's",
              md.get("namespace") == (values["grafana"]["dashboards"]["namespace"] or NAMESPACE), str(md.get("namespace")))
        elif not (o.get("kind") in ("Role", "RoleBinding") and md.get("namespace") in values["watchNamespaces"]):
            t(f"{name_of(o)} in the release namespace", md.get("namespace") == NAMESPACE, str(md.get("namespace")))
    check_dashboards(t, values, objs)

    hv, cv = values["haproxy"], values["controller"]
    dep = workload(objs)
    if not t(f"one workload, a {cv['kind']}", dep.get("kind") == cv["kind"], str([name_of(o) for o in objs if o.get("kind") in ("Deployment", "DaemonSet")])):
        return
    fullname = dep["metadata"]["name"]
    if cv["kind"] == "Deployment":
        t("replicas from values", dep["spec"].get("replicas") == values["replicaCount"])
        ru = dep["spec"].get("strategy", {}).get("rollingUpdate", {})
        t("rolling update starts a new pod before stopping an old one", ru == {"maxSurge": 1, "maxUnavailable": 0}, str(ru))
    else:
        t("DaemonSet: no replicas, no Deployment strategy", "replicas" not in dep["spec"] and "strategy" not in dep["spec"])
        ru = dep["spec"].get("updateStrategy", {}).get("rollingUpdate", {})
        on_node_ports = cv["hostNetwork"] or cv["hostPort"]["enabled"]
        want_ru = {"maxSurge": 0, "maxUnavailable": 1} if on_node_ports else {"maxSurge": 1, "maxUnavailable": 0}
        t("DaemonSet update: no surge on the node's ports, else surge first", ru == want_ru, str(ru))
    tmpl = dep["spec"]["template"]
    pod = tmpl["spec"]
    pod_sc = pod.get("securityContext", {})
    h, c, init = container(pod, "haproxy"), container(pod, "controller"), container(pod, "init-config")
    mode = hv["lowPorts"]

    # --- the pod's shape
    t("containers are haproxy and controller", [x["name"] for x in pod.get("containers", [])] == ["haproxy", "controller"])
    t("init container is init-config", [x["name"] for x in pod.get("initContainers", [])] == ["init-config"])
    t("pod automountServiceAccountToken false", pod.get("automountServiceAccountToken") is False)
    t("no shared process namespace", pod.get("shareProcessNamespace") in (None, False))
    for key in ("hostPID", "hostIPC"):
        t(f"no {key}", not pod.get(key))
    if cv["hostNetwork"]:
        t("hostNetwork with dnsPolicy ClusterFirstWithHostNet",
          pod.get("hostNetwork") is True and pod.get("dnsPolicy") == "ClusterFirstWithHostNet", f"{pod.get('hostNetwork')} {pod.get('dnsPolicy')}")
    else:
        t("no hostNetwork, default dnsPolicy", not pod.get("hostNetwork") and "dnsPolicy" not in pod)
    t("pod runAsNonRoot", pod_sc.get("runAsNonRoot") is True)
    t("pod seccomp RuntimeDefault", pod_sc.get("seccompProfile", {}).get("type") == "RuntimeDefault")
    t("pod fsGroup set", isinstance(pod_sc.get("fsGroup"), int))
    sysctls = pod_sc.get("sysctls", [])
    if mode == "sysctl":
        t("sysctl ip_unprivileged_port_start=0", sysctls == [{"name": "net.ipv4.ip_unprivileged_port_start", "value": "0"}], str(sysctls))
    else:
        t("no pod sysctls", not sysctls, str(sysctls))

    # --- every container: read-only root, no capabilities, seccomp
    for x in (h, c, init):
        n = x.get("name")
        sc = x.get("securityContext", {})
        t(f"{n} readOnlyRootFilesystem", sc.get("readOnlyRootFilesystem") is True)
        t(f"{n} drops ALL capabilities", sc.get("capabilities", {}).get("drop") == ["ALL"])
        t(f"{n} not privileged", not sc.get("privileged"))
        t(f"{n} seccomp RuntimeDefault", (sc.get("seccompProfile") or pod_sc.get("seccompProfile", {})).get("type") == "RuntimeDefault")
    for x in (c, init):
        n = x.get("name")
        sc = x.get("securityContext", {})
        uid = effective(x, pod_sc, "runAsUser")
        t(f"{n} non-root", effective(x, pod_sc, "runAsNonRoot") is True and isinstance(uid, int) and uid != 0, f"uid {uid}")
        t(f"{n} allowPrivilegeEscalation false", sc.get("allowPrivilegeEscalation") is False)
        t(f"{n} adds no capability", not sc.get("capabilities", {}).get("add"))
    hsc = h.get("securityContext", {})
    huid = effective(h, pod_sc, "runAsUser")
    hadd = sorted(hsc.get("capabilities", {}).get("add") or [])
    if mode in ("none", "sysctl", "node"):
        t("haproxy non-root", effective(h, pod_sc, "runAsNonRoot") is True and huid not in (None, 0), f"uid {huid}")
        t("haproxy allowPrivilegeEscalation false", hsc.get("allowPrivilegeEscalation") is False)
        t("haproxy adds no capability", hadd == [], str(hadd))
    elif mode == "capability":
        t("haproxy non-root (setcap image)", effective(h, pod_sc, "runAsNonRoot") is True and huid not in (None, 0))
        t("haproxy adds NET_BIND_SERVICE only", hadd == ["NET_BIND_SERVICE"], str(hadd))
        t("haproxy allows escalation for file capabilities", hsc.get("allowPrivilegeEscalation") is True)
    elif mode == "root":
        t("haproxy runs as root", huid == 0 and hsc.get("runAsNonRoot") is False)
        t("root haproxy: NET_BIND_SERVICE, DAC_READ_SEARCH only", hadd == ["DAC_READ_SEARCH", "NET_BIND_SERVICE"], str(hadd))
        t("root haproxy allowPrivilegeEscalation false", hsc.get("allowPrivilegeEscalation") is False)

    # --- haproxy: the official image, unmodified, with the exact command line
    socket_mode = "660" if mode == "root" else "600"
    t("haproxy image from values", h.get("image") == f"{hv['image']['repository']}:{hv['image']['tag']}", str(h.get("image")))
    t("haproxy command", h.get("command") == ["haproxy"], str(h.get("command")))
    t("haproxy args exact", h.get("args") == ["-W", "-db", "-S", f"{SOCKET},mode,{socket_mode}", "-f", "/etc/haproxy"], str(h.get("args")))
    t("haproxy has no env", not h.get("env") and not h.get("envFrom"))
    hm = mounts(h)
    t("haproxy mounts", {p: bool(m.get("readOnly")) for p, m in hm.items()} == {"/etc/haproxy": True, "/var/lib/haproxy": True, "/var/run/haproxy": False}, str(hm))

    # --- the service account token: controller only
    creds = secret_bearing_volumes(pod)
    t("a token volume exists", "kube-api-access" in creds, str(creds))
    for x in (h, init):
        used = {m["name"] for m in x.get("volumeMounts", [])}
        t(f"{x.get('name')} mounts no credentials", not (used & creds), str(used & creds))
        t(f"{x.get('name')} nothing under /var/run/secrets", not any(p.startswith("/var/run/secrets") for p in mounts(x)))
    cm = mounts(c)
    sa = cm.get(SA_PATH, {})
    t("controller mounts the token read-only", sa.get("name") == "kube-api-access" and sa.get("readOnly") is True, str(sa))
    vol = next((v for v in pod.get("volumes", []) if v["name"] == "kube-api-access"), {})
    srcs = vol.get("projected", {}).get("sources", [])
    t("token volume: token, ca.crt, namespace",
      any(s.get("serviceAccountToken", {}).get("path") == "token" for s in srcs)
      and any(s.get("configMap", {}).get("name") == "kube-root-ca.crt" for s in srcs)
      and any(i.get("path") == "namespace" for s in srcs for i in s.get("downwardAPI", {}).get("items", [])))
    sa_obj = one(objs, "ServiceAccount")
    if sa_obj:
        t("ServiceAccount automount false", sa_obj.get("automountServiceAccountToken") is False)
        t("pod uses the ServiceAccount", pod.get("serviceAccountName") == sa_obj["metadata"]["name"])

    # --- shared volumes and their access
    vols = {v["name"]: v for v in pod.get("volumes", [])}
    for path in ("/etc/haproxy", "/var/lib/haproxy", "/var/run/haproxy"):
        hvn, cvn = hm.get(path, {}).get("name"), cm.get(path, {}).get("name")
        t(f"{path} shared emptyDir", hvn is not None and hvn == cvn and "emptyDir" in vols.get(hvn, {}), f"{hvn} {cvn}")
        t(f"controller {path} writable", path in cm and not cm[path].get("readOnly"))
    im = mounts(init)
    t("init-config mounts /etc/haproxy only, writable", list(im) == ["/etc/haproxy"] and not im["/etc/haproxy"].get("readOnly")
      and im["/etc/haproxy"]["name"] == hm.get("/etc/haproxy", {}).get("name"))
    t("init-config copies the seed config", init.get("command") == ["cp", "/usr/share/tugboat/haproxy.cfg", "/etc/haproxy/haproxy.cfg"], str(init.get("command")))
    t("init-config is the controller image", init.get("image") == c.get("image"))

    # --- the master socket can be opened by the controller
    cuid = effective(c, pod_sc, "runAsUser")
    if socket_mode == "600":
        t("socket 600: controller uid == haproxy uid", cuid == huid, f"{cuid} vs {huid}")
    else:
        hgid, cgid = effective(h, pod_sc, "runAsGroup"), effective(c, pod_sc, "runAsGroup")
        t("socket 660: controller in haproxy's group", hgid is not None and hgid in (cgid, pod_sc.get("fsGroup")) , f"{hgid} vs {cgid}")

    # --- controller flags agree with ports and objects
    args = c.get("args", [])
    t("controller runs `tugboat run`", args[:1] == ["run"], str(args[:1]))
    t("--master-socket", flag(args, "master-socket") == SOCKET)
    t("--config-dir", flag(args, "config-dir") == "/etc/haproxy")
    t("--lib-dir", flag(args, "lib-dir") == "/var/lib/haproxy")
    t("--http-port == haproxy http port == values", flag(args, "http-port") == str(port_of(h, "http")) == str(hv["httpPort"]))
    t("--https-port == haproxy https port == values", flag(args, "https-port") == str(port_of(h, "https")) == str(hv["httpsPort"]))
    t("--stats-port == haproxy stats port", flag(args, "stats-port") == str(port_of(h, "stats")) == str(cv["statsPort"]))
    t("--controller-port == controller admin port", flag(args, "controller-port") == str(port_of(c, "admin")) == str(cv["port"]))
    t("--log-format", flag(args, "log-format") == cv["logFormat"])
    cmap = next((m for m in by_kind(objs, "ConfigMap") if m["metadata"]["name"] == fullname), {})
    t("ConfigMap holds the config values", (cmap.get("data") or {}) == values["config"], str(cmap.get("data")))
    t("--configmap names the ConfigMap", flag(args, "configmap") == f"{NAMESPACE}/{cmap.get('metadata', {}).get('name')}")
    others = [m for m in by_kind(objs, "ConfigMap") if m is not cmap and not is_dashboards(m)]
    if values["tcpServices"]:
        tcp = others[0] if len(others) == 1 else {}
        t("one TCP services ConfigMap holds tcpServices", (tcp.get("data") or {}) == values["tcpServices"], str(tcp.get("data")))
        t("--tcp-services-configmap names it", flag(args, "tcp-services-configmap") == f"{NAMESPACE}/{tcp.get('metadata', {}).get('name')}",
          str(flag(args, "tcp-services-configmap")))
    else:
        t("no TCP services: no ConfigMap, no flag", not others and "tcp-services-configmap" not in flags(args))
    svc = next((s for s in by_kind(objs, "Service") if s["metadata"]["name"] == fullname), {})
    t("--publish-service names the Service", bool(svc) and flag(args, "publish-service") == f"{NAMESPACE}/{fullname}")
    t("--ingress-class", flag(args, "ingress-class") == values["ingressClass"]["name"])
    t("--controller-class", flag(args, "controller-class") == "tugboat.dev/ingress")
    t("--watch-namespace per namespace", flags(args).get("watch-namespace", []) == values["watchNamespaces"])
    gw = values["gatewayApi"]
    t("--enable-gateway-api only when asked", ("enable-gateway-api" in flags(args)) == gw["enabled"])
    t("--gateway-controller-name from values when enabled",
      flag(args, "gateway-controller-name") == (gw["controllerName"] if gw["enabled"] else None))
    listener_ports = gw["listenerPorts"] if gw["enabled"] else []
    t("--gateway-listener-ports from values when enabled",
      flag(args, "gateway-listener-ports") == (",".join(map(str, listener_ports)) if listener_ports else None),
      str(flag(args, "gateway-listener-ports")))
    t("--watch-ingress-without-class only when asked", ("watch-ingress-without-class" in flags(args)) == cv["watchIngressWithoutClass"])
    t("--profiling only when asked", ("profiling" in flags(args)) == cv["profiling"])
    for extra in cv["extraArgs"]:
        t(f"extraArgs {extra}", extra in args)
    env = {e["name"]: e.get("valueFrom", {}).get("fieldRef", {}).get("fieldPath") for e in c.get("env", [])}
    t("POD_NAME, POD_NAMESPACE from the downward API", env.get("POD_NAME") == "metadata.name" and env.get("POD_NAMESPACE") == "metadata.namespace", str(env))

    # --- probes on the right containers
    def probe(x, kind):
        return x.get(kind, {}).get("httpGet", {})
    for kind in ("startupProbe", "livenessProbe", "readinessProbe"):
        g = probe(h, kind)
        t(f"haproxy {kind} /healthz on stats", g.get("path") == "/healthz" and g.get("port") in ("stats", port_of(h, "stats")), str(g))
    sp = h.get("startupProbe", {})
    t("haproxy startupProbe allows >= 2 minutes", sp.get("periodSeconds", 10) * sp.get("failureThreshold", 3) >= 120)
    t("controller livenessProbe /healthz on admin", probe(c, "livenessProbe") == {"path": "/healthz", "port": "admin"}, str(probe(c, "livenessProbe")))
    t("controller readinessProbe /readyz on admin", probe(c, "readinessProbe") == {"path": "/readyz", "port": "admin"}, str(probe(c, "readinessProbe")))
    t("init-config has no probes", not any(k in init for k in ("startupProbe", "livenessProbe", "readinessProbe")))

    # --- Service: 80/443 to haproxy's ports
    labels = tmpl["metadata"].get("labels", {})
    sel = svc.get("spec", {}).get("selector", {})
    t("Service selects the pods", bool(sel) and all(labels.get(k) == v for k, v in sel.items()))
    ports = {p["port"]: p["targetPort"] for p in svc.get("spec", {}).get("ports", [])}
    want = {values["service"]["httpPort"]: "http", values["service"]["httpsPort"]: "https"}
    extra = user_ports(values)
    want.update({port: name for name, port in extra.items()})
    t("Service ports map to haproxy http/https and each user port to its bind", ports == want, f"{ports} != {want}")
    t("Service ports all TCP", all(p.get("protocol") == "TCP" for p in svc.get("spec", {}).get("ports", [])))

    # --- haproxy's ports: a user's port P at P + 10000; hostPorts as the values say
    hports = {p["name"]: p for p in h.get("ports", [])}
    for name, port in extra.items():
        t(f"haproxy port {name} binds {port + BIND_PORT_OFFSET}", hports.get(name, {}).get("containerPort") == port + BIND_PORT_OFFSET, str(hports.get(name)))
    host_ports = {name: p["hostPort"] for x in (h, c) for name, p in ((q["name"], q) for q in x.get("ports", [])) if "hostPort" in p}
    if cv["hostPort"]["enabled"]:
        want_host = {"http": cv["hostPort"]["ports"]["http"], "https": cv["hostPort"]["ports"]["https"], **extra}
        t("hostPorts: node 80/443 to http/https, each user port P to its bind", host_ports == want_host, f"{host_ports} != {want_host}")
    else:
        t("no hostPort", not host_ports, str(host_ports))
    t("Service type from values", svc.get("spec", {}).get("type") == values["service"]["type"])

    # --- PDB
    pdb = one(objs, "PodDisruptionBudget")
    if values["podDisruptionBudget"]["enabled"] and cv["kind"] == "Deployment":
        ml = pdb.get("spec", {}).get("selector", {}).get("matchLabels", {})
        t("PDB selects the pods", bool(ml) and all(labels.get(k) == v for k, v in ml.items()))
    else:
        t("no PDB", not pdb)

    # --- IngressClass
    ic = one(objs, "IngressClass")
    t("IngressClass", ic.get("metadata", {}).get("name") == values["ingressClass"]["name"] and ic.get("spec", {}).get("controller") == "tugboat.dev/ingress")
    ann = ic.get("metadata", {}).get("annotations", {}) or {}
    t("default-class annotation iff ingressClass.default",
      (ann.get("ingressclass.kubernetes.io/is-default-class") == "true") == values["ingressClass"]["default"], str(ann))

    # --- RBAC
    check_rbac(t, values, objs, sa_obj["metadata"]["name"] if sa_obj else pod.get("serviceAccountName"), flag(args, "election-id"))
    for cm_flag in ("configmap", "tcp-services-configmap"):
        target = flag(args, cm_flag)
        if target:
            ns, name = target.split("/", 1)
            t(f"the controller may read the --{cm_flag} ConfigMap", can_read_configmap(objs, ns, name), target)

    # --- ServiceMonitor
    sms = by_kind(objs, "ServiceMonitor")
    if values["serviceMonitor"]["enabled"]:
        t("one ServiceMonitor", len(sms) == 1)
        if sms:
            sm = sms[0]
            msel = sm["spec"]["selector"]["matchLabels"]
            selected = [s for s in by_kind(objs, "Service") if all(s["metadata"].get("labels", {}).get(k) == v for k, v in msel.items())]
            t("ServiceMonitor selects exactly the metrics Service", len(selected) == 1 and selected[0] is not svc, str([s["metadata"]["name"] for s in selected]))
            if len(selected) == 1:
                names = {p["name"]: p["targetPort"] for p in selected[0]["spec"]["ports"]}
                t("ServiceMonitor endpoints exist", all(names.get(e["port"]) in ("admin", "stats") for e in sm["spec"]["endpoints"]), str(names))
    else:
        t("no ServiceMonitor", not sms)


# Verbs the controller may have, by (apiGroup, resource): reads, its status, Events, Lease.
READ = {"get", "list", "watch"}
ALLOWED = {
    ("", "services"): READ, ("", "secrets"): READ, ("", "configmaps"): READ,
    ("discovery.k8s.io", "endpointslices"): READ,
    ("networking.k8s.io", "ingresses"): READ, ("networking.k8s.io", "ingressclasses"): READ,
    ("networking.k8s.io", "ingresses/status"): {"update", "patch"},
    ("", "events"): {"create", "patch"}, ("events.k8s.io", "events"): {"create", "patch"},
    ("coordination.k8s.io", "leases"): {"create", "get", "update", "patch"},
}
# The Gateway API, with gatewayApi.enabled only.
GATEWAY_ALLOWED = {
    ("gateway.networking.k8s.io", "gateways"): READ, ("gateway.networking.k8s.io", "httproutes"): READ,
    ("gateway.networking.k8s.io", "tlsroutes"): READ,
    ("gateway.networking.k8s.io", "tcproutes"): READ,
    ("gateway.networking.k8s.io", "referencegrants"): READ,
    ("gateway.networking.k8s.io", "gatewayclasses"): READ, ("", "namespaces"): READ,
    ("gateway.networking.k8s.io", "gatewayclasses/status"): {"update", "patch"},
    ("gateway.networking.k8s.io", "gateways/status"): {"update", "patch"},
    ("gateway.networking.k8s.io", "httproutes/status"): {"update", "patch"},
    ("gateway.networking.k8s.io", "tlsroutes/status"): {"update", "patch"},
    ("gateway.networking.k8s.io", "tcproutes/status"): {"update", "patch"},
}
NAMESPACED_READS = {(g, r) for (g, r), v in ALLOWED.items() if v == READ and r != "ingressclasses"}
GATEWAY_CLUSTER_SCOPED = {"gatewayclasses", "gatewayclasses/status", "namespaces"}


def grants(role: dict) -> set[tuple[str, str, str]]:
    return {(g, r, v) for rule in role.get("rules", []) for g in rule.get("apiGroups", [])
            for r in rule.get("resources", []) for v in rule.get("verbs", [])}


def can_read_configmap(objs: list[dict], namespace: str, name: str) -> bool:
    """A rendered role grants get, list and watch of that ConfigMap."""
    def covers(role):
        return any("" in rule.get("apiGroups", []) and "configmaps" in rule.get("resources", [])
                   and READ <= set(rule.get("verbs", []))
                   and (not rule.get("resourceNames") or name in rule["resourceNames"])
                   for rule in role.get("rules", []))
    roles = by_kind(objs, "ClusterRole") + [r for r in by_kind(objs, "Role") if r["metadata"].get("namespace") == namespace]
    return any(covers(r) for r in roles)


def check_rbac(t, values: dict, objs: list[dict], sa: str, election_id) -> None:
    roles = by_kind(objs, "ClusterRole") + by_kind(objs, "Role")
    gateway = values["gatewayApi"]["enabled"]
    allowed = {**ALLOWED, **GATEWAY_ALLOWED} if gateway else ALLOWED
    for role in roles:
        for g, res, v in grants(role):
            t(f"{name_of(role)} grants {v} {res or '?'} ({g or 'core'}) only if allowed",
              "*" not in (g, res, v) and v in allowed.get((g, res), set()))
        for rule in role.get("rules", []):
            if "coordination.k8s.io" in rule.get("apiGroups", []):
                t(f"{name_of(role)} leases only in a Role of the release namespace",
                  role["kind"] == "Role" and role["metadata"].get("namespace") == NAMESPACE)
                if set(rule.get("verbs", [])) - {"create"}:
                    t(f"{name_of(role)} lease updates limited to the election id", rule.get("resourceNames") == [election_id], str(rule.get("resourceNames")))
    bindings = by_kind(objs, "ClusterRoleBinding") + by_kind(objs, "RoleBinding")
    for b in bindings:
        t(f"{name_of(b)} binds the controller's ServiceAccount",
          b.get("subjects") == [{"kind": "ServiceAccount", "name": sa, "namespace": NAMESPACE}], str(b.get("subjects")))
        kind = b["roleRef"]["kind"]
        target = [r for r in roles if r["kind"] == kind and r["metadata"]["name"] == b["roleRef"]["name"]
                  and (kind == "ClusterRole" or r["metadata"].get("namespace") == b["metadata"].get("namespace"))]
        t(f"{name_of(b)} refers to a rendered role", len(target) == 1)
    cluster = set().union(*(grants(r) for r in by_kind(objs, "ClusterRole"))) if by_kind(objs, "ClusterRole") else set()
    t("IngressClasses readable cluster-wide", {("networking.k8s.io", "ingressclasses", v) for v in READ} <= cluster)
    watch = values["watchNamespaces"]
    gateway_grants = {(g, r, v) for (g, r), vs in GATEWAY_ALLOWED.items() for v in vs}
    if gateway:
        wanted_cluster = {x for x in gateway_grants if x[1] in GATEWAY_CLUSTER_SCOPED}
        t("Gateway API cluster-scoped kinds readable, class status writable", wanted_cluster <= cluster, str(wanted_cluster - cluster))
        if not watch:
            t("Gateway API kinds readable and their status writable", gateway_grants <= cluster, str(gateway_grants - cluster))
        for ns in watch:
            rs = [r for r in by_kind(objs, "Role") if r["metadata"].get("namespace") == ns]
            g = set().union(*(grants(r) for r in rs)) if rs else set()
            wanted = {x for x in gateway_grants if x[1] not in GATEWAY_CLUSTER_SCOPED}
            t(f"Role in {ns} reads Gateway API kinds and writes their status", wanted <= g, str(wanted - g))
    else:
        t("no Gateway API rights without gatewayApi.enabled", not any(g == "gateway.networking.k8s.io" for g, _, _ in cluster))
    if not watch:
        t("cluster-wide reads in the ClusterRole", {(g, r, v) for g, r in NAMESPACED_READS for v in READ} <= cluster)
        t("Ingress status writable", {("networking.k8s.io", "ingresses/status", "patch"), ("networking.k8s.io", "ingresses/status", "update")} <= cluster)
    else:
        cluster_kinds = {"ingressclasses"} | (GATEWAY_CLUSTER_SCOPED if gateway else set())
        t("ClusterRole limited to IngressClasses (and the Gateway API's cluster-scoped kinds)",
          {r for _, r, _ in cluster} == cluster_kinds, str(cluster))
        for ns in watch:
            rs = [r for r in by_kind(objs, "Role") if r["metadata"].get("namespace") == ns]
            g = set().union(*(grants(r) for r in rs)) if rs else set()
            t(f"Role in {ns} reads what the controller watches", {(gr, r, v) for gr, r in NAMESPACED_READS for v in READ} <= g)
            t(f"Role in {ns} writes Ingress status and Events", ("networking.k8s.io", "ingresses/status", "patch") in g and ("events.k8s.io", "events", "create") in g)
            t(f"RoleBinding in {ns}", any(b["metadata"].get("namespace") == ns for b in by_kind(objs, "RoleBinding")))


# --------------------------------------------------------------------------- dashboards


def is_dashboards(o: dict) -> bool:
    return o.get("kind") == "ConfigMap" and o.get("metadata", {}).get("name", "").endswith("-dashboards")


def dashboard_sources() -> dict[str, dict]:
    """The chart's dashboard files, parsed, by the ConfigMap key they go under."""
    return {f"tugboat-{p.name}": json.loads(p.read_text()) for p in sorted(DASHBOARDS.glob("*.json"))}


def check_dashboards(t, values: dict, objs: list[dict]) -> None:
    """The dashboards ConfigMap: rendered only when enabled, with the label Grafana's
    sidecar selects by, holding every dashboard file's JSON unchanged."""
    gv = values["grafana"]["dashboards"]
    maps = [o for o in objs if is_dashboards(o)]
    if not gv["enabled"]:
        t("dashboards off: no dashboards ConfigMap", not maps, str([name_of(o) for o in maps]))
        return
    if not t("dashboards on: one dashboards ConfigMap", len(maps) == 1, str([name_of(o) for o in maps])):
        return
    labels = maps[0]["metadata"].get("labels") or {}
    t("dashboards ConfigMap has the sidecar's label", labels.get(gv["label"]) == gv["labelValue"], str(labels))
    t("dashboards ConfigMap has the extra labels", all(labels.get(k) == v for k, v in gv["labels"].items()), str(labels))
    data = maps[0].get("data") or {}
    sources = dashboard_sources()
    t("dashboards ConfigMap holds every dashboard file", sorted(data) == sorted(sources) and len(sources) >= 2,
      f"{sorted(data)} vs {sorted(sources)}")
    for key, source in sources.items():
        try:
            parsed = json.loads(data.get(key, ""))
        except ValueError as err:
            parsed = f"not JSON: {err}"
        t(f"{key} in the ConfigMap parses and equals the file", parsed == source)


def check_dashboard_files(r: Results) -> None:
    """deploy/grafana/ holds the chart's dashboards (links to them, one source), and each
    file is a dashboard Grafana imports with its Prometheus data source as a variable."""
    chart_files = sorted(p.name for p in DASHBOARDS.glob("*.json"))
    grafana_files = sorted(p.name for p in GRAFANA.glob("*.json"))
    r.check("deploy/grafana/ holds the chart's dashboards", chart_files == grafana_files and len(chart_files) >= 2,
            f"{grafana_files} vs {chart_files}")
    for name in chart_files:
        source, copy_ = DASHBOARDS / name, GRAFANA / name
        r.check(f"deploy/grafana/{name} is the chart's file", copy_.exists() and copy_.read_bytes() == source.read_bytes())
        board = json.loads(source.read_text())
        variables = {v["name"]: v for v in board.get("templating", {}).get("list", [])}
        ds = variables.get("datasource", {})
        r.check(f"{name}: a datasource variable of type prometheus", ds.get("type") == "datasource" and ds.get("query") == "prometheus")
        panels = [p for p in board.get("panels", []) if p.get("type") != "row"]
        ids = [p.get("id") for p in board.get("panels", [])]
        r.check(f"{name}: uid, title, schemaVersion, unique panel ids",
                bool(board.get("uid")) and bool(board.get("title")) and board.get("schemaVersion", 0) >= 36 and len(ids) == len(set(ids)))
        bad = [p.get("title") for p in panels
               if p.get("datasource", {}).get("uid") != "${datasource}" or not p.get("targets")
               or not p.get("description") or any(not tg.get("expr") for tg in p["targets"])]
        r.check(f"{name}: every panel has a description and queries the ${{datasource}}", not bad and len(panels) > 0, str(bad))


# --------------------------------------------------------------------------- value sets


def value_sets(defaults: dict) -> list[tuple[str, dict]]:
    sets = [
        ("defaults", {}),
        ("watchNamespaces", {"watchNamespaces": ["team-a", "team-b"]}),
        ("serviceMonitor", {"serviceMonitor": {"enabled": True, "labels": {"release": "prometheus"}}}),
        ("grafana dashboards", {"grafana": {"dashboards": {"enabled": True}}}),
        ("grafana dashboards elsewhere", {"grafana": {"dashboards": {
            "enabled": True, "namespace": "monitoring", "label": "example.com/dashboard", "labelValue": "tugboat",
            "labels": {"team": "edge"}, "annotations": {"grafana_folder": "Ingress"}}}}),
        ("defaultClass", {"ingressClass": {"default": True}}),
        ("gatewayApi", {"gatewayApi": {"enabled": True, "controllerName": "example.com/gateway"}}),
        ("gatewayApi+watchNamespaces", {"gatewayApi": {"enabled": True}, "watchNamespaces": ["team-a"]}),
        ("DaemonSet", {"controller": {"kind": "DaemonSet"}, "haproxy": {"httpPort": 80, "httpsPort": 443, "lowPorts": "sysctl"}}),
        ("DaemonSet+hostPort+ports", {"controller": {"kind": "DaemonSet", "hostPort": {"enabled": True}},
                                      "tcpServices": {"5432": "db/postgres:5432", "22": "git/ssh:ssh::PROXY", "9000": "default/mqtt:9000:PROXY:PROXY"},
                                      "gatewayApi": {"enabled": True, "listenerPorts": [8081, 9001]}}),
        ("DaemonSet+hostNetwork", {"controller": {"kind": "DaemonSet", "hostNetwork": True},
                                   "haproxy": {"httpPort": 80, "httpsPort": 443, "lowPorts": "node"},
                                   "tcpServices": {"9000": "default/banner:9000"}}),
        ("ports+watchNamespaces", {"tcpServices": {"6379": "cache/redis:6379"}, "watchNamespaces": ["cache"],
                                   "gatewayApi": {"enabled": True, "listenerPorts": [8081]}}),
        ("options", {"controller": {"logFormat": "json", "watchIngressWithoutClass": True, "profiling": True,
                                    "extraArgs": ["--some-flag=1"], "publishAddress": "203.0.113.10",
                                    "defaultBackendService": "default/fallback",
                                    "defaultSslCertificate": "tugboat/default-cert"},
                     "config": {"timeout-client": "30s"}, "replicaCount": 3,
                     "podDisruptionBudget": {"enabled": False},
                     "service": {"type": "NodePort", "externalTrafficPolicy": "Local"},
                     "tolerations": [{"key": "edge", "operator": "Exists", "effect": "NoSchedule"}],
                     "affinity": {"podAntiAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
                         {"weight": 100, "podAffinityTerm": {"topologyKey": "kubernetes.io/hostname",
                          "labelSelector": {"matchLabels": {"app.kubernetes.io/name": "tugboat"}}}}]}}}),
    ]
    for path in sorted(EXAMPLES.glob("*.yaml")):  # Helm values files
        sets.append((f"examples/helm/{path.name}", yaml.safe_load(path.read_text()) or {}))
    return [(label, over) for label, over in sets]


# --------------------------------------------------------------------------- mutations


def self_test(r: Results, defaults: dict, objs: list[dict]) -> None:
    """Breaks a good render in ways the checks must catch; each must produce failures."""

    def pod_of(o):
        return pod_spec(o)

    def token_in_haproxy(o):
        container(pod_of(o), "haproxy")["volumeMounts"].append({"name": "kube-api-access", "mountPath": SA_PATH, "readOnly": True})

    def writable_root(o):
        container(pod_of(o), "controller")["securityContext"]["readOnlyRootFilesystem"] = False

    def unknown_field(o):
        container(pod_of(o), "haproxy")["imagePullPolcy"] = "Always"

    def haproxy_args(o):
        container(pod_of(o), "haproxy")["args"].remove("-db")

    def probe_moved(o):
        container(pod_of(o), "controller")["readinessProbe"]["httpGet"]["port"] = "stats"

    def rbac_wildcard(o):
        by_kind(o, "ClusterRole")[0]["rules"].append({"apiGroups": [""], "resources": ["*"], "verbs": ["get"]})

    def root_controller(o):
        container(pod_of(o), "controller")["securityContext"]["runAsUser"] = 0

    def caps_kept(o):
        container(pod_of(o), "haproxy")["securityContext"]["capabilities"] = {"drop": ["NET_RAW"]}

    def host_network(o):
        pod_of(o)["hostNetwork"] = True

    def host_port(o):
        container(pod_of(o), "haproxy")["ports"][0]["hostPort"] = 80

    # (what is broken, how, the check that must catch it)
    for name, mutate, expected in [
        ("token in haproxy", token_in_haproxy, "haproxy mounts no credentials"),
        ("writable root fs", writable_root, "controller readOnlyRootFilesystem"),
        ("unknown field", unknown_field, "schema Deployment/"),
        ("haproxy args", haproxy_args, "haproxy args exact"),
        ("probe on the wrong port", probe_moved, "controller readinessProbe"),
        ("RBAC wildcard", rbac_wildcard, "grants get *"),
        ("controller as root", root_controller, "controller non-root"),
        ("capabilities kept", caps_kept, "haproxy drops ALL capabilities"),
        ("hostNetwork not asked for", host_network, "no hostNetwork"),
        ("a hostPort not asked for", host_port, "no hostPort"),
    ]:
        broken = copy.deepcopy(objs)
        mutate(broken)
        inner = Results()
        check_render(inner, "mutant", defaults, broken)
        caught = [f for f in inner.failures if expected in f]
        r.check(f"[self-test] a render with {name} fails check '{expected}'", bool(caught),
                "not caught; failures were: " + "; ".join(inner.failures))


# --------------------------------------------------------------------------- image


def check_dockerfile(r: Results, objs: list[dict]) -> None:
    """The controller image cannot be built here (no container engine): lint the
    Dockerfiles, and check that the image provides what the chart runs in it."""
    hadolint = Path(os.environ.get("HADOLINT") or Path(sys.executable).parent / "hadolint")
    dockerfile = ROOT / "deploy" / "docker" / "Dockerfile"
    for path in (dockerfile, ROOT / "examples" / "haproxy-netbind" / "Dockerfile"):
        proc = subprocess.run([str(hadolint), "--no-color", str(path)], capture_output=True, text=True)
        r.check(f"hadolint {path.relative_to(ROOT)}", proc.returncode == 0, (proc.stdout + proc.stderr).strip())
    text = dockerfile.read_text()
    pod = pod_spec(objs)
    seed = (container(pod, "init-config").get("command") or [None, None])[1]
    r.check("image ships the seed config the init container copies",
            seed is not None and f"init-config/haproxy.cfg {seed}" in text, str(seed))
    r.check("image has cp for the init container", "/usr/bin/cp" in text)
    r.check("image entrypoint is tugboat (the chart passes `run ...` as args)",
            'ENTRYPOINT ["/usr/bin/tugboat"]' in text and "command" not in container(pod, "controller"))
    r.check("image builds the tugboat package from the workspace root",
            "cargo build --release --locked -p tugboat" in text and "COPY . ." in text)
    r.check("image user is non-root", "USER 65532:65532" in text)


# --------------------------------------------------------------------------- main


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("-v", "--verbose", action="store_true", help="print every value set as it is checked")
    opts = ap.parse_args()
    r = Results()
    defaults = yaml.safe_load((CHART / "values.yaml").read_text())

    default_objs: list[dict] = []
    for label, over in value_sets(defaults):
        values = deep_merge(defaults, over)
        proc = lint(over)
        r.check(f"[{label}] helm lint --strict", proc.returncode == 0, (proc.stdout + proc.stderr).strip()[-800:])
        proc, objs = render(over)
        if not r.check(f"[{label}] helm template", proc.returncode == 0, proc.stderr.strip()[-800:]):
            continue
        before = len(r.failures)
        check_render(r, label, values, objs)
        if opts.verbose:
            print(f"{label}: {len(objs)} objects, {len(r.failures) - before} failures")
        if label == "defaults":
            default_objs = objs

    # The haproxy image and tag change the haproxy container's image and nothing else.
    for label, over in [("tag", {"haproxy": {"image": {"tag": "2.6-alpine"}}}),
                        ("repository", {"haproxy": {"image": {"repository": "mirror.example.com/library/haproxy"}}})]:
        _, objs = render(over)
        a, b = copy.deepcopy(default_objs), copy.deepcopy(objs)
        ha = container(pod_spec(a), "haproxy")
        hb = container(pod_spec(b), "haproxy")
        image_changed = bool(ha) and bool(hb) and ha.get("image") != hb.get("image")
        ha.pop("image", None)
        hb.pop("image", None)
        r.check(f"[haproxy.image.{label}] changes the haproxy image only", image_changed and a == b and len(a) > 0)

    # Values the schema or the templates must refuse.
    for label, over, needle in [
        ("misspelled top-level key", {"replicas": 3}, "additional properties"),
        ("misspelled nested key", {"haproxy": {"imgae": {"tag": "3.0"}}}, "additional properties"),
        ("misspelled controller key", {"controller": {"extraArg": ["--x"]}}, "additional properties"),
        ("unknown log format", {"controller": {"logFormat": "xml"}}, "logFormat"),
        ("unknown lowPorts mode", {"haproxy": {"lowPorts": "magic"}}, "lowPorts"),
        ("port 80 without a lowPorts mode", {"haproxy": {"httpPort": 80}}, "below 1024"),
        ("capability mode with the official image", {"haproxy": {"httpPort": 80, "lowPorts": "capability"}}, "setcap"),
        ("config key a ConfigMap cannot hold", {"config": {"bad key": "x"}}, "'bad key' does not match pattern"),
        ("bad default backend reference", {"controller": {"defaultBackendService": "no-namespace"}}, "defaultBackendService"),
        ("unknown workload kind", {"controller": {"kind": "StatefulSet"}}, "kind"),
        ("hostNetwork in a Deployment", {"controller": {"hostNetwork": True}}, "need controller.kind DaemonSet"),
        ("hostPort in a Deployment", {"controller": {"hostPort": {"enabled": True}}}, "need controller.kind DaemonSet"),
        ("hostNetwork and hostPort", {"controller": {"kind": "DaemonSet", "hostNetwork": True, "hostPort": {"enabled": True}}}, "does not apply with controller.hostNetwork"),
        ("sysctl mode with hostNetwork", {"controller": {"kind": "DaemonSet", "hostNetwork": True}, "haproxy": {"httpPort": 80, "lowPorts": "sysctl"}}, "lowPorts=node"),
        ("node mode without hostNetwork", {"haproxy": {"httpPort": 80, "lowPorts": "node"}}, "needs controller.hostNetwork"),
        ("TCP service in a bad format", {"tcpServices": {"9000": "svc:9000"}}, "does not match pattern"),
        ("TCP service port not a number", {"tcpServices": {"ssh": "git/ssh:22"}}, "does not match pattern"),
        ("TCP service on the Service's HTTP port", {"tcpServices": {"80": "default/web:80"}}, "already service.httpPort"),
        ("TCP service port without a bind port", {"tcpServices": {"60000": "default/web:80"}}, "between 1 and 55535"),
        ("TCP service bound on haproxy's HTTP port", {"haproxy": {"httpPort": 18080}, "tcpServices": {"8080": "default/web:80"}}, "already haproxy.httpPort"),
        ("listener port and TCP service on one port", {"tcpServices": {"9000": "default/a:9000"}, "gatewayApi": {"enabled": True, "listenerPorts": [9000]}}, "already tcpServices"),
        ("listener port 443", {"gatewayApi": {"enabled": True, "listenerPorts": [443]}}, "already service.httpsPort"),
        ("listener ports without the Gateway API", {"gatewayApi": {"listenerPorts": [8081]}}, "needs gatewayApi.enabled"),
    ]:
        proc, _ = render(over)
        r.check(f"[rejects] {label}", proc.returncode != 0 and needle in proc.stderr, proc.stderr.strip()[-300:] or "rendered")

    # The checks themselves must be able to fail.
    if default_objs:
        self_test(r, defaults, default_objs)

    # deploy/manifests/tugboat.yaml is the chart rendered with defaults.
    proc = subprocess.run([str(RENDER_MANIFESTS), "--stdout"], capture_output=True, text=True)
    in_sync = proc.returncode == 0 and MANIFESTS.exists() and MANIFESTS.read_text() == proc.stdout
    r.check("deploy/manifests/tugboat.yaml matches the chart", in_sync,
            "out of date: regenerate with `scripts/render-manifests.sh` and commit it" + (f" ({proc.stderr.strip()})" if proc.returncode else ""))
    if MANIFESTS.exists():
        docs = [o for o in yaml.safe_load_all(MANIFESTS.read_text()) if o]
        bad = [f"{name_of(o)}: {e}" for o in docs for e in schema_errors(o)]
        r.check("deploy/manifests/tugboat.yaml passes the schema", not bad and len(docs) > 0, "; ".join(bad))

    # The example manifests users apply next to the chart.
    for path in sorted(p for p in ROOT.glob("examples/*/*.yaml") if p.parent != EXAMPLES):
        docs = [o for o in yaml.safe_load_all(path.read_text()) if o]
        bad = [f"{name_of(o)}: {e}" for o in docs for e in schema_errors(o)]
        r.check(f"{path.relative_to(ROOT)} passes the schema", not bad and len(docs) > 0, "; ".join(bad))
    for path in sorted(ROOT.glob("examples/*/ingress.yaml")):
        for o in yaml.safe_load_all(path.read_text()):
            if o and o.get("kind") == "Ingress" and path.parent.name != "quickstart":
                r.check(f"{path.relative_to(ROOT)} uses the chart's IngressClass",
                        o["spec"].get("ingressClassName") == defaults["ingressClass"]["name"])

    check_dockerfile(r, default_objs)
    check_dashboard_files(r)

    for failure in r.failures:
        print(f"FAIL {failure}")
    total_failed = len(r.failures)
    print(f"chart: {r.passed} passed, {total_failed} failed")
    return 1 if total_failed else 0


if __name__ == "__main__":
    sys.exit(main())
