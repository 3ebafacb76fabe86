#!/usr/bin/python3
"""Which includes run against the layers (issue 25), counted from the sources.

The layers, lowest first; a file in one may include its own layer and any lower one:

    base < policy < config < net < tls < fleet < {http1, http2} < exchange < admin < server

http1 and http2 are peers: neither includes the other (their shared vocabulary, such as
base/field.hpp, lives lower). A file's layer is its directory under include/politeproxy/
or proxy/ (proxy/main.cpp and proxy/asio_impl.cpp stand above every layer).

Each layer is also a library that links only those below it (politeproxy_layer() in
CMakeLists.txt). This check runs with every build (target 'layers') and as the ctest
'layers'. It fails on any include that runs upward or sideways (move the shared part down
instead), and on a library that does not match its directory: a source of proxy/LAYER/
that is not in politeproxy_LAYER, or a library that links a layer not below its own.

    /usr/bin/python3 tests/layers/check_layers.py [--source DIR]"""
import argparse
import os
import re
import sys

ORDER = [["base"], ["policy"], ["config"], ["net"], ["tls"], ["fleet"], ["http1", "http2"], ["exchange"],
         ["admin"], ["server"]]
RANK = {layer: rank for rank, group in enumerate(ORDER) for layer in group}
INCLUDE = re.compile(r'^\s*#\s*include\s+"politeproxy/([a-z0-9_]+)/([^"]+)"', re.M)
HERE = os.path.dirname(os.path.abspath(__file__))


def layer_of(path):
    parts = path.split(os.sep)
    for root in (["include", "politeproxy"], ["proxy"]):
        if parts[:len(root)] == root and len(parts) > len(root) + 1:
            return parts[len(root)]
    return None  # proxy/main.cpp, proxy/asio_impl.cpp: above every layer


def upward_includes(source):
    found = set()
    for top in ("include", "proxy"):
        for dirpath, _, files in os.walk(os.path.join(source, top)):
            for name in files:
                if not name.endswith((".hpp", ".cpp")):
                    continue
                full = os.path.join(dirpath, name)
                rel = os.path.relpath(full, source)
                layer = layer_of(rel)
                if layer is None:
                    continue
                if layer not in RANK:
                    sys.exit("%s: directory '%s' is in no layer; add it to ORDER in %s" % (rel, layer, __file__))
                with open(full, encoding="utf-8") as f:
                    text = f.read()
                for to_layer, header in INCLUDE.findall(text):
                    if to_layer == layer:
                        continue
                    if to_layer not in RANK:
                        sys.exit("%s includes politeproxy/%s/: a directory in no layer" % (rel, to_layer))
                    if RANK[to_layer] >= RANK[layer]:
                        found.add("%s -> politeproxy/%s/%s" % (rel, to_layer, header))
    return found


LAYER_CALL = re.compile(r"politeproxy_layer\(\s*([a-z0-9_]+)(.*?)\)\s*$", re.S | re.M)


def library_faults(source):
    """What CMakeLists.txt's politeproxy_layer() calls say against the directories."""
    with open(os.path.join(source, "CMakeLists.txt"), encoding="utf-8") as f:
        text = f.read()
    faults = []
    libraries = {}
    for name, body in LAYER_CALL.findall(text):
        words = body.split()
        sources, links, part = [], [], None
        for w in words:
            if w in ("SOURCES", "LINKS"):
                part = w
            elif part == "SOURCES":
                sources.append(w)
            elif part == "LINKS":
                links.append(w)
        libraries[name] = (sources, links)
    for layer in RANK:
        if layer not in libraries:
            faults.append("no politeproxy_layer(%s ...) in CMakeLists.txt" % layer)
            continue
        sources, links = libraries[layer]
        on_disk = {"proxy/%s/%s" % (layer, n) for n in os.listdir(os.path.join(source, "proxy", layer))
                   if n.endswith(".cpp")}
        for missing in sorted(on_disk - set(sources)):
            faults.append("%s is not in politeproxy_%s" % (missing, layer))
        for stray in sorted(set(sources) - on_disk):
            faults.append("politeproxy_%s lists %s, which is not in proxy/%s/" % (layer, stray, layer))
        for link in links:
            linked = link[len("politeproxy_"):] if link.startswith("politeproxy_") else None
            if linked in RANK and RANK[linked] >= RANK[layer]:
                faults.append("politeproxy_%s links politeproxy_%s, which is not below it" % (layer, linked))
    for name in sorted(set(libraries) - set(RANK)):
        faults.append("politeproxy_layer(%s ...) names no layer of ORDER" % name)
    return faults


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--source", default=os.path.normpath(os.path.join(HERE, "..", "..")))
    args = ap.parse_args()
    found = sorted(upward_includes(args.source))
    for entry in found:
        print("upward include: %s" % entry)
    faults = library_faults(args.source)
    for fault in faults:
        print("library: %s" % fault)
    print("%d upward includes, %d library faults" % (len(found), len(faults)))
    return 1 if found or faults else 0


if __name__ == "__main__":
    sys.exit(main())
