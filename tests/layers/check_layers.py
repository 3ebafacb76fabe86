#!/usr/bin/python3
"""Which includes run against the layers (issue 25), counted from the sources.

The layers, lowest first; a file in one may include its own layer and any lower one:

    base < policy < config < net < tls < fleet < {http1, http2} < exchange < admin < server

http1 and http2 are peers: neither includes the other (their shared vocabulary, such as
base/field.hpp, lives lower). A file's layer is its directory under include/politeproxy/
or proxy/ (proxy/main.cpp and proxy/asio_impl.cpp stand above every layer).

Until the layers are libraries of their own, this is what holds them: every include that
runs upward or sideways must be listed in upward_includes.txt ("from -> to", one per line,
with the reason after a '#'). The check fails on one not listed (a new upward include:
move the shared part down instead), and on a listed one that is gone (strike it: the list
only shrinks).

    /usr/bin/python3 tests/layers/check_layers.py [--source DIR] [--list]

--list prints every upward include found, in the list's format."""
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


def read_list(path):
    listed = {}
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            entry = line.split("#", 1)[0].strip()
            if entry:
                listed[entry] = n
    return listed


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--source", default=os.path.normpath(os.path.join(HERE, "..", "..")))
    ap.add_argument("--list", action="store_true", help="print every upward include found")
    args = ap.parse_args()
    found = upward_includes(args.source)
    if args.list:
        for entry in sorted(found):
            print(entry)
        return 0
    listed = read_list(os.path.join(HERE, "upward_includes.txt"))
    new = sorted(found - listed.keys())
    gone = sorted(listed.keys() - found)
    for entry in new:
        print("NEW upward include (not in tests/layers/upward_includes.txt): %s" % entry)
    for entry in gone:
        print("GONE (strike it from upward_includes.txt, line %d): %s" % (listed[entry], entry))
    print("%d upward includes, %d listed, %d new, %d gone" % (len(found), len(listed), len(new), len(gone)))
    return 1 if new or gone else 0


if __name__ == "__main__":
    sys.exit(main())
