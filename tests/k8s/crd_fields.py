#!/usr/bin/env python3
"""Writes the field list of a CustomResourceDefinition's schema, which tests/k8s/manifest_test.cpp checks
every rendered manifest field against. Usage:

    crd_fields.py CRD.yaml "WHERE THE CRD CAME FROM" > tests/k8s/KIND-VERSION-fields.txt

One line per leaf field of the stored version's openAPIV3Schema (status left out: nobody writes it), `*` for
a map key and `[]` for a list element. The object's own metadata, which CRDs leave to the API server's
ObjectMeta, is listed as the schema lists the ObjectMeta it embeds (pod templates): annotations,
finalizers, labels, name, namespace.
"""
import sys

import yaml


def leaves(schema, path, out):
    if "properties" in schema:
        for name, child in schema["properties"].items():
            leaves(child, f"{path}.{name}" if path else name, out)
    elif schema.get("type") == "array" and "items" in schema:
        leaves(schema["items"], path + "[]", out)
    elif isinstance(schema.get("additionalProperties"), dict):
        leaves(schema["additionalProperties"], path + ".*", out)
    else:
        out.append(path)


def main():
    crd_file, origin = sys.argv[1], sys.argv[2]
    crd = yaml.safe_load(open(crd_file))
    version = next(v for v in crd["spec"]["versions"] if v.get("storage"))
    fields = []
    leaves(version["schema"]["openAPIV3Schema"], "", fields)
    fields = [f for f in fields if f != "metadata" and not f.startswith("status")]
    fields += ["metadata." + f for f in ("annotations.*", "finalizers[]", "labels.*", "name", "namespace")]
    kind = crd["spec"]["names"]["kind"]
    print(f"# Fields of a {kind} ({crd['spec']['group']}/{version['name']}), from {origin},")
    print("# written by tests/k8s/crd_fields.py: `*` is a map key, `[]` a list element.")
    print("\n".join(sorted(fields)))


if __name__ == "__main__":
    main()
