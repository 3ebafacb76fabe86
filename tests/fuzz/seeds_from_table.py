#!/usr/bin/python3
"""Writes the rows of the hostile-input table (tests/integration/hostile_input_table.py)
into the fuzz seed corpora, so the fuzzers start from every case the table names:
  request_head/    each row's request bytes (port 8080, host h.test)
  chunked_decoder/ the body of each chunked row (two leading bytes pick the split)
  target/          each row's request target
Run it after changing the table: /usr/bin/python3 tests/fuzz/seeds_from_table.py"""
import glob
import hashlib
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "integration"))
import hostile_input_table as table  # noqa: E402

CORPUS = os.path.join(HERE, "corpus")


def write(target, data):
    name = "row-" + hashlib.sha1(data).hexdigest()[:12]
    with open(os.path.join(CORPUS, target, name), "wb") as f:
        f.write(data)


def main():
    for old in glob.glob(os.path.join(CORPUS, "*", "row-*")):
        os.remove(old)
    for row in table.ROWS:
        data = row.send.replace(b"{port}", b"8080")
        write("request_head", data)
        head, _, body = data.partition(b"\r\n\r\n")
        line = head.split(b"\r\n", 1)[0].split(b" ")
        if len(line) >= 2:
            write("target", line[1])
        if b"chunked" in head.lower() and body:
            write("chunked_decoder", b"\x03\x07" + body)
    print("seeds written under", CORPUS)


if __name__ == "__main__":
    main()
