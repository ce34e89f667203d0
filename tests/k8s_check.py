#!/usr/bin/env python3
"""What the Kubernetes schemas cannot see in cluster/k8s/: the references
between a layout's resources (test_k8s_manifests.sh runs the schemas).

    k8s_check.py LAYOUT_DIR OUT_DIR

Follows LAYOUT_DIR/kustomization.yaml (resources: files and folders with their
own kustomization.yaml) and checks: every listed file exists and every .yaml
beside a kustomization.yaml is listed; each workload's ConfigMap, PVC and
(named) Secret volumes exist in the layout or are the Secret the README tells
users to create (microspec-link); each container's --config file is a key of a
ConfigMap mounted at that folder; a container with a readiness probe probes
GET /health on a port it declares, and that port is the config's http.port;
each Service selects the pods of some workload and targets a port they declare.
Writes each ConfigMap key ending in .cfg to OUT_DIR (for microspec-config
--check) and prints the resource files, one a line. Exit 1 with the reasons
when a check fails. Needs PyYAML (a dependency of kubernetes-validate).
"""
import os
import re
import sys

import yaml

USER_SECRETS = {"microspec-link"}  # created by the user (README), never in a layout
# kustomize's Kustomization fields this project may use (kubernetes-validate has
# no schema for the kind): a misspelt one would be ignored by nothing but kustomize.
KUS_FIELDS = {"apiVersion", "kind", "resources", "images", "replicas", "labels", "namePrefix", "nameSuffix",
              "namespace", "patches", "configMapGenerator", "secretGenerator", "generatorOptions", "components"}
fails = []


def fail(msg):
    fails.append(msg)


def collect(d, files):
    k = os.path.join(d, "kustomization.yaml")
    if not os.path.isfile(k):
        fail(f"{d}: no kustomization.yaml")
        return
    kus = yaml.safe_load(open(k, encoding="utf-8"))
    if kus.get("apiVersion") != "kustomize.config.k8s.io/v1beta1" or kus.get("kind") != "Kustomization":
        fail(f"{k}: not a kustomize.config.k8s.io/v1beta1 Kustomization")
    for key in sorted(set(kus) - KUS_FIELDS):
        fail(f"{k}: unknown field {key}")
    listed = set()
    for r in kus.get("resources", []):
        p = os.path.normpath(os.path.join(d, r))
        if os.path.isdir(p):
            collect(p, files)
        elif os.path.isfile(p):
            files.append(p)
            listed.add(p)
        else:
            fail(f"{k}: resource {r} does not exist")
    names = {}
    for f in files:
        if os.path.dirname(f) == d:
            for doc in yaml.safe_load_all(open(f, encoding="utf-8")):
                if doc and doc.get("kind") in ("Deployment", "StatefulSet"):
                    names[doc["metadata"]["name"]] = doc
    for r in kus.get("replicas", []):
        if r.get("name") not in names:
            fail(f"{k}: replicas names {r.get('name')}, no Deployment of this folder")
        elif not isinstance(r.get("count"), int) or r["count"] < 1:
            fail(f"{k}: replicas count of {r.get('name')} is not a positive integer")
    for f in sorted(os.listdir(d)):
        p = os.path.join(d, f)
        if f.endswith(".yaml") and f != "kustomization.yaml" and p not in listed:
            fail(f"{p} is not listed in {k}")


def main():
    layout, out = sys.argv[1], sys.argv[2]
    files = []
    collect(layout, files)
    docs = []
    for f in files:
        for doc in yaml.safe_load_all(open(f, encoding="utf-8")):
            if doc:
                docs.append((f, doc))
    names = {}
    for f, d in docs:
        names.setdefault(d.get("kind"), {})[d.get("metadata", {}).get("name")] = d
    cfgs = {}
    for name, cm in names.get("ConfigMap", {}).items():
        for key, text in (cm.get("data") or {}).items():
            if key.endswith(".cfg"):
                path = os.path.join(out, key)
                with open(path, "w", encoding="utf-8") as fh:
                    fh.write(text)
                cfgs[(name, key)] = text
    workloads = [d for kind in ("Deployment", "StatefulSet") for d in names.get(kind, {}).values()]
    if not workloads:
        fail(f"{layout}: no Deployment")
    pod_ports = []  # (labels, {port names and numbers})
    for w in workloads:
        wname = w["metadata"]["name"]
        spec = w["spec"]["template"]["spec"]
        labels = w["spec"]["template"]["metadata"].get("labels", {})
        sel = w["spec"]["selector"].get("matchLabels", {})
        if any(labels.get(k) != v for k, v in sel.items()):
            fail(f"{wname}: its selector {sel} does not select its own pods {labels}")
        vols = {v["name"]: v for v in spec.get("volumes", [])}
        for v in vols.values():
            if "configMap" in v and v["configMap"]["name"] not in names.get("ConfigMap", {}):
                fail(f"{wname}: volume {v['name']}: no ConfigMap {v['configMap']['name']} in the layout")
            if "persistentVolumeClaim" in v and \
                    v["persistentVolumeClaim"]["claimName"] not in names.get("PersistentVolumeClaim", {}):
                fail(f"{wname}: volume {v['name']}: no PVC {v['persistentVolumeClaim']['claimName']} in the layout")
            if "secret" in v and v["secret"]["secretName"] not in USER_SECRETS | set(names.get("Secret", {})):
                fail(f"{wname}: volume {v['name']}: Secret {v['secret']['secretName']} is neither in the layout "
                     f"nor the one the README has users create")
        ports = set()
        for c in spec.get("initContainers", []) + spec["containers"]:
            for m in c.get("volumeMounts", []):
                if m["name"] not in vols:
                    fail(f"{wname}/{c['name']}: mounts {m['name']}, which is not a volume of the pod")
            cmd = c.get("command", []) + c.get("args", [])
            cfg_text = None
            if "--config" in cmd:
                path = cmd[cmd.index("--config") + 1]
                folder, key = os.path.split(path)
                mount = [m for m in c.get("volumeMounts", []) if m["mountPath"] == folder]
                cm = vols.get(mount[0]["name"], {}).get("configMap", {}).get("name") if mount else None
                if (cm, key) not in cfgs:
                    fail(f"{wname}/{c['name']}: --config {path} is no key of a ConfigMap mounted at {folder}")
                else:
                    cfg_text = cfgs[(cm, key)]
            cports = {p.get("name"): p["containerPort"] for p in c.get("ports", [])}
            ports |= set(cports) | set(cports.values())
            probe = c.get("readinessProbe")
            if probe:
                get = probe.get("httpGet", {})
                if get.get("path") != "/health":
                    fail(f"{wname}/{c['name']}: readiness probe path {get.get('path')}, not /health")
                port = cports.get(get.get("port"), get.get("port"))
                if port not in cports.values():
                    fail(f"{wname}/{c['name']}: readiness probe on port {get.get('port')}, not declared")
                m = re.search(r"\bport\s*=\s*(\d+)", cfg_text or "")
                if not m or int(m.group(1)) != port:
                    fail(f"{wname}/{c['name']}: probes port {port}, the config's http.port is "
                         f"{m.group(1) if m else 'unset'}")
        pod_ports.append((labels, ports))
    for name, svc in names.get("Service", {}).items():
        sel = svc["spec"].get("selector", {})
        match = [p for labels, p in pod_ports if all(labels.get(k) == v for k, v in sel.items())]
        if not match:
            fail(f"Service {name}: selector {sel} selects no pod of the layout")
        for p in svc["spec"]["ports"]:
            t = p.get("targetPort", p["port"])
            if match and not any(t in ports for ports in match):
                fail(f"Service {name}: targetPort {t} is no port of the pods it selects")
    for f in fails:
        print(f"FAIL: {f}", file=sys.stderr)
    for f in files:
        print(f)
    sys.exit(1 if fails else 0)


if __name__ == "__main__":
    main()
