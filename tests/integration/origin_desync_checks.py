"""Judging a run of an origin-desync case (origin_desync_exchange.py).

expect() is politeproxy's contract: the failures of its run of a case. outcome() is what
any proxy did, by aspect, to compare two proxies:
  first answer   what the first client got: the status (with its tag: own, another
                 request's, untagged) after any interim statuses, "relayed 101",
                 or "no answer"
  stray bytes    which clients (#0 the first, #1.. the follow-ups) received a marker
                 (EVIL / STRAY) or bytes after their response; "none"
  follow-ups     "all own" or, per follow-up that did not get its own tagged answer,
                 what it got instead (another request's answer, 502, ...)
  origin conn    whether a follow-up went on the first request's origin connection
                 ("reused" / "not reused") after the misbehaviour"""
import collections

from origin_desync_exchange import markers_in, origin_conns

def check_tagged(fails, what, rep, rid):
    """rep is the origin's own tagged 200 for rid, and nothing else."""
    f = rep.final
    if f is None or rep.error:
        fails.append("%s: no response: %s; received %r" % (what, rep.error, rep.raw[:300]))
        return
    body_want = ("answer to %s" % rid).encode()
    if f.status != 200 or f.header("X-Answer-To") != rid or f.body != body_want:
        fails.append("%s: expected its own answer (200, X-Answer-To: %s, body %r), got %d"
                     " X-Answer-To: %s body %r; raw %r"
                     % (what, rid, body_want, f.status, f.header("X-Answer-To"), f.body[:100],
                        rep.raw[:300]))
    bad = [s for s in rep.interim if s not in (100, 103)]
    if bad:
        fails.append("%s: interim responses %s reached the client" % (what, bad))
    if rep.leftover:
        fails.append("%s: %d byte(s) after the response: %r" % (what, len(rep.leftover),
                                                                rep.leftover[:200]))
    if markers_in(rep.raw):
        fails.append("%s: stray origin bytes (%s) reached the client: %r"
                     % (what, "/".join(markers_in(rep.raw)), rep.raw[:300]))


def expect(case, run, o):
    """The failures of politeproxy's run of a case."""
    fails = []
    label, rid = case.prefix, case.prefix + "-0"
    rep, f = run.first, run.first.final
    if case.kind == "stray":
        # 1. the bodiless response, its own, and no byte behind it
        what = "%s: first request %s (%s answered %d)" % (label, rid, case.method, case.status)
        if f is None or rep.error:
            fails.append("%s: no response: %s; received %r" % (what, rep.error, rep.raw[:300]))
        elif f.status != case.status or f.header("X-Answer-To") != rid:
            fails.append("%s: got %d X-Answer-To: %s; raw %r"
                         % (what, f.status, f.header("X-Answer-To"), rep.raw[:300]))
        if rep.leftover or markers_in(rep.raw):
            fails.append("%s: body/stray bytes reached the client: leftover %r raw %r"
                         % (what, rep.leftover[:200], rep.raw[:300]))
    elif case.kind == "refused":
        # 2 a/b. a 502 of politeproxy's own, nothing of the 101 / 150 or behind it
        what = "%s: GET %s answered %s by the origin" % (label, rid, label)
        if f is None or rep.error:
            fails.append("%s: no response: %s; received %r" % (what, rep.error, rep.raw[:300]))
        elif f.status != 502 or "politeproxy" not in (f.header("Proxy-Status") or ""):
            fails.append("%s: expected 502 with Proxy-Status naming politeproxy, got %d"
                         " Proxy-Status: %s; raw %r"
                         % (what, f.status, f.header("Proxy-Status"), rep.raw[:300]))
        if (b"HTTP/1.1 101" in rep.raw or [s for s in rep.interim if s not in (100, 103)]
                or markers_in(rep.raw)):
            fails.append("%s: the %s or the bytes behind it reached the client (interim %s): %r"
                         % (what, label, rep.interim, rep.raw[:300]))
        if rep.leftover:
            fails.append("%s: %d byte(s) after the response: %r" % (what, len(rep.leftover),
                                                                    rep.leftover[:200]))
    else:
        # 2 c. the 200 after the interim responses, its own
        check_tagged(fails, "%s: GET %s answered %s then 200" % (label[1:], rid, label[1:]),
                     rep, rid)
    for frid, frep in run.follow:
        check_tagged(fails, "%s: request %s" % (label, frid), frep, frid)
    if case.kind == "refused":
        c0, c1 = origin_conns(o, rid), origin_conns(o, label + "-1")
        if not c0 or not c1 or c1[0] in c0:
            fails.append("%s: the next request was not sent on a new origin connection (the"
                         " %s's connection was reused): %s connection(s) %s, %s-1 on %s; %s"
                         % (label, label, rid, c0, label, c1, o.summary()))
    # whatever the differential says: no stray byte and no other request's answer
    oc = outcome(case, run, o)
    if oc["stray bytes"] != "none":
        fails.append("%s: outcome: stray bytes reached client(s): %s" % (label, oc["stray bytes"]))
    if oc["follow-ups"] != "all own":
        fails.append("%s: outcome: follow-ups did not all get their own answer: %s"
                     % (label, oc["follow-ups"]))
    return fails


# --------------------------------------------------------------------------------------
# outcomes, to compare two proxies
# --------------------------------------------------------------------------------------
ASPECTS = ("first answer", "stray bytes", "follow-ups", "origin conn")


def index_of(case, tag):
    """'#k' for the request id <prefix>-k, else the tag itself."""
    if tag and tag.startswith(case.prefix + "-") and tag[len(case.prefix) + 1:].isdigit():
        return "#" + tag[len(case.prefix) + 1:]
    return tag


def answer(case, rep, rid):
    """What one client got, in short: '502', '204 own', '200 answer to #1',
    '200 untagged (EVIL)', 'relayed 101', '[100,103] 200 own', 'no answer'."""
    f = rep.final
    pre = "[%s] " % ",".join(map(str, rep.interim)) if rep.interim else ""
    if f is None or rep.error:
        return pre + "no answer"
    if f.status == 101:
        return pre + "relayed 101"
    tag = f.header("X-Answer-To")
    if tag == rid:
        what = " own"
    elif tag:
        what = " answer to " + index_of(case, tag)
    elif f.status < 400:
        what = " untagged"
    else:
        what = ""
    marks = markers_in(f.body)
    return "%s%d%s%s" % (pre, f.status, what, " (%s)" % "/".join(marks) if marks else "")


def outcome(case, run, o):
    """{aspect: value} of one side's run of a case (see the docstring)."""
    rid0 = case.prefix + "-0"
    stray = []
    for i, (rid, rep) in enumerate([(rid0, run.first)] + run.follow):
        bad = markers_in(rep.raw)
        if rep.leftover and not bad:
            bad = ["%d byte(s) after the response" % len(rep.leftover)]
        if bad:
            stray.append("#%d %s" % (i, "/".join(bad)))
    others = ["#%s %s" % (index_of(case, rid)[1:], answer(case, rep, rid))
              for rid, rep in run.follow if answer(case, rep, rid) != "200 own"]
    c0 = set(origin_conns(o, rid0))
    later = [c for rid, _ in run.follow for c in origin_conns(o, rid)]
    if not c0:
        conn = "first request not at the origin"
    else:
        conn = "reused" if c0 & set(later) else "not reused"
    return collections.OrderedDict([
        ("first answer", answer(case, run.first, rid0)),
        ("stray bytes", ", ".join(stray) or "none"),
        ("follow-ups", ", ".join(others) or "all own"),
        ("origin conn", conn),
    ])
