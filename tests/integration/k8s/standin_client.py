#!/usr/bin/python3
"""One scenario of the Pod API through python3-kubernetes (Debian's package: a
real client generated from Kubernetes' OpenAPI), against whatever server the
kubeconfig names. Prints one JSON object of what the server answered; the
test (standin.test.mjs) decides whether that is what a real API server does.

    standin_client.py KUBECONFIG NAMESPACE
"""
import json
import sys
import threading

from kubernetes import client, config, watch
from kubernetes.client.rest import ApiException

config.load_kube_config(config_file=sys.argv[1])
ns = sys.argv[2]
v1 = client.CoreV1Api()
out = {}


def err(fn):
    try:
        fn()
        return None
    except ApiException as e:
        body = json.loads(e.body) if e.body else {}
        return {"status": e.status, "reason": body.get("reason"), "message": body.get("message")}


def pod(name, role):
    return client.V1Pod(
        metadata=client.V1ObjectMeta(name=name, labels={"sandbox.tusko.io/service": "t1",
                                                         "sandbox.tusko.io/role": role}),
        spec=client.V1PodSpec(containers=[client.V1Container(name="sandbox", image="tusko-sandbox")],
                                               termination_grace_period_seconds=1))


created = v1.create_namespaced_pod(ns, pod("py-a", "pool"))
v1.create_namespaced_pod(ns, pod("py-b", "pool"))
v1.create_namespaced_pod(ns, pod("py-c", "sandbox"))
out["created_rv_nonempty"] = bool(created.metadata.resource_version)
out["created_uid_nonempty"] = bool(created.metadata.uid)
out["dup"] = err(lambda: v1.create_namespaced_pod(ns, pod("py-a", "pool")))

pools = v1.list_namespaced_pod(ns, label_selector="sandbox.tusko.io/service=t1,sandbox.tusko.io/role=pool")
out["pool_names"] = sorted(p.metadata.name for p in pools.items)
out["not_pool"] = sorted(p.metadata.name for p in v1.list_namespaced_pod(
    ns, label_selector="sandbox.tusko.io/role!=pool").items)
out["in_set"] = sorted(p.metadata.name for p in v1.list_namespaced_pod(
    ns, label_selector="sandbox.tusko.io/role in (sandbox,other)").items)
page1 = v1.list_namespaced_pod(ns, limit=2)
page2 = v1.list_namespaced_pod(ns, limit=2, _continue=page1.metadata._continue)
out["pages"] = [[p.metadata.name for p in page1.items], [p.metadata.name for p in page2.items]]
out["page_rv_same"] = page1.metadata.resource_version == page2.metadata.resource_version
out["missing"] = err(lambda: v1.read_namespaced_pod("nope", ns))

# The claim: one JSON Patch testing the pool label and replacing it, raced by
# 16 threads on one pod: exactly one wins, the others get 422.
CAS = [{"op": "test", "path": "/metadata/labels/sandbox.tusko.io~1role", "value": "pool"},
       {"op": "replace", "path": "/metadata/labels/sandbox.tusko.io~1role", "value": "sandbox"},
       {"op": "add", "path": "/spec/activeDeadlineSeconds", "value": 600}]
results = []
lock = threading.Lock()


def claim():
    api = client.CoreV1Api()
    try:
        api.patch_namespaced_pod("py-a", ns, CAS)
        r = 200
    except ApiException as e:
        r = e.status
    with lock:
        results.append(r)


threads = [threading.Thread(target=claim) for _ in range(16)]
for t in threads:
    t.start()
for t in threads:
    t.join()
out["cas"] = sorted(results)
a = v1.read_namespaced_pod("py-a", ns)
out["after_cas"] = {"role": a.metadata.labels["sandbox.tusko.io/role"],
                    "deadline": a.spec.active_deadline_seconds}
out["deadline_up"] = err(lambda: v1.patch_namespaced_pod(
    "py-a", ns, [{"op": "replace", "path": "/spec/activeDeadlineSeconds", "value": 700}]))
out["deadline_down"] = v1.patch_namespaced_pod(
    "py-a", ns, [{"op": "replace", "path": "/spec/activeDeadlineSeconds", "value": 500}]).spec.active_deadline_seconds
out["image_change"] = err(lambda: v1.patch_namespaced_pod(
    "py-a", ns, [{"op": "replace", "path": "/spec/restartPolicy", "value": "Never"}]))

# Optimistic concurrency: a merge patch carrying an old resourceVersion is a 409.
b = v1.read_namespaced_pod("py-b", ns)
v1.patch_namespaced_pod("py-b", ns, {"metadata": {"annotations": {"x": "1"}}})
out["stale_rv"] = err(lambda: v1.patch_namespaced_pod(
    "py-b", ns, {"metadata": {"resourceVersion": b.metadata.resource_version, "annotations": {"x": "2"}}}))

# Watch from a list's resourceVersion, on the stable label: a claim shows as
# MODIFIED, a selector exit as DELETED on a watch of role=pool, a delete as
# DELETED.
lst = v1.list_namespaced_pod(ns, label_selector="sandbox.tusko.io/service=t1")
events = []
pool_events = []


def watch_all():
    w = watch.Watch()
    for ev in w.stream(v1.list_namespaced_pod, ns, label_selector="sandbox.tusko.io/service=t1",
                       resource_version=lst.metadata.resource_version, timeout_seconds=5):
        events.append((ev["type"], ev["object"].metadata.name,
                       ev["object"].metadata.labels.get("sandbox.tusko.io/role")))
        if ev["type"] == "DELETED" and ev["object"].metadata.name == "py-c":
            w.stop()


def watch_pool():
    w = watch.Watch()
    for ev in w.stream(v1.list_namespaced_pod, ns, label_selector="sandbox.tusko.io/role=pool",
                       resource_version=lst.metadata.resource_version, timeout_seconds=5):
        pool_events.append((ev["type"], ev["object"].metadata.name))
        if ev["type"] == "DELETED":
            w.stop()


ta = threading.Thread(target=watch_all)
tp = threading.Thread(target=watch_pool)
ta.start()
tp.start()
import time  # noqa: E402

time.sleep(0.5)
v1.patch_namespaced_pod("py-b", ns, CAS)
c = v1.read_namespaced_pod("py-c", ns)
out["wrong_uid"] = err(lambda: v1.delete_namespaced_pod(
    "py-c", ns, body=client.V1DeleteOptions(preconditions=client.V1Preconditions(uid="00000000-0000-0000-0000-000000000000"))))
v1.delete_namespaced_pod("py-c", ns, body=client.V1DeleteOptions(
    grace_period_seconds=0, preconditions=client.V1Preconditions(uid=c.metadata.uid)))
ta.join()
tp.join()
out["events"] = events
out["pool_events"] = pool_events
out["gone"] = err(lambda: v1.read_namespaced_pod("py-c", ns))

# An expired resourceVersion: the watch answers with an ERROR 410, which the
# client raises as ApiException 410 ("Expired").
try:
    for ev in watch.Watch().stream(v1.list_namespaced_pod, ns, resource_version="1", timeout_seconds=2):
        pass
    out["expired"] = None
except ApiException as e:
    out["expired"] = e.status

print(json.dumps(out))
