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
