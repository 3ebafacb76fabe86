#!/usr/bin/python3
"""The container image and the compose stack (Dockerfile, conf/compose/), checked without
an engine, and built and run where one exists:
  - the image's runtime stage installs every Debian package the built binary links
    (ldd, then dpkg -S: nothing missing at run time);
  - its HEALTHCHECK command answers 0 against a running proxy's /readyz and fails once the
    proxy is gone;
  - compose.yaml: Redis, the ca service, two proxies sharing the CA volume (read-only) and
    the fleet config, Prometheus scraping both admin listeners, Grafana under a profile with
    the dashboard provisioned; every published port on loopback; the fleet config passes
    --check-config (with a CA from --gen-ca), prometheus.yml passes `promtool check config`;
  - with `docker` (a daemon answering) or `buildah` (and the debian:12 base images): the
    image builds, runs with loopback --listen/--admin-listen, and answers /readyz.
    Without either, that part says so and is skipped."""
import json
import os
import re
import shutil
import subprocess
import sys
import time

import yaml

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as H  # noqa: E402

REPO = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
COMPOSE = os.path.join(REPO, "conf", "compose")
IMAGE = "politeproxy-test"
# buildah on this project's build machine stores images with the vfs driver
# (../shared/tools/container-base.sh): the same here unless the caller chose one.
BUILDAH_ENV = dict(os.environ, STORAGE_DRIVER=os.environ.get("STORAGE_DRIVER", "vfs"))


def dockerfile():
    with open(os.path.join(REPO, "Dockerfile")) as f:
        return f.read()


def runtime_packages(text):
    """The packages the last stage installs."""
    last = text[text.rindex("\nFROM "):]
    m = re.search(r"apt-get install[^\n]*\\\n(.*?)&&", last, re.S)
    H.check(m is not None, "the runtime stage installs no packages")
    return set(re.findall(r"[a-z0-9][a-z0-9.+-]+", m.group(1).replace("\\", " ")))


def check_runtime_libraries(binary, installed):
    out = subprocess.run(["ldd", binary], stdout=subprocess.PIPE, text=True, check=True).stdout
    paths = re.findall(r"=> (/\S+)", out)
    needed = {}
    for p in paths:
        real = os.path.realpath(p)
        r = subprocess.run(["dpkg", "-S", real], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        if r.returncode != 0:
            r = subprocess.run(["dpkg", "-S", p], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        H.check(r.returncode == 0, "no Debian package owns %s (ldd %s)" % (p, binary))
        needed[r.stdout.split(":")[0]] = p
    # What every Debian image has already (libc, libstdc++, libgcc are essential there).
    base = {"libc6", "libstdc++6", "libgcc-s1", "zlib1g", "libzstd1", "libgcrypt20", "liblzma5", "libgpg-error0",
            "libsystemd0", "liblz4-1", "libcap2", "libcrypt1", "libselinux1", "libpcre2-8-0"}
    # Packages pulled in by those the stage names (their own dependencies), looked up only
    # for what the stage does not name.
    closure = set(installed)
    for pkg in installed if set(p.split(":")[0] for p in needed) - closure - base else ():
        r = subprocess.run(["apt-cache", "depends", "--recurse", "--no-recommends", "--no-suggests",
                            "--no-conflicts", "--no-breaks", "--no-replaces", "--no-enhances", pkg],
                           stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        closure |= set(re.findall(r"^\s*(?:Depends: |PreDepends: )?<?([a-z0-9][a-z0-9.+-]+)>?$", r.stdout, re.M))
    missing = {pkg: p for pkg, p in needed.items() if pkg.split(":")[0] not in closure | base}
    H.check(not missing, "the runtime stage lacks packages the binary links: %s" % missing)
    H.log("runtime libraries: %d packages, all installed by the image: %s" % (len(needed), sorted(needed)))


def healthcheck_command(text):
    m = re.search(r"HEALTHCHECK[^\n]*\\\n\s*CMD (\[.*\])", text)
    H.check(m is not None, "the Dockerfile has no HEALTHCHECK ... CMD [...]")
    return json.loads(m.group(1))


def check_compose(t):
    with open(os.path.join(COMPOSE, "compose.yaml")) as f:
        compose = yaml.safe_load(f)
    services = compose["services"]
    for name in ("redis", "ca", "proxy-a", "proxy-b", "prometheus", "grafana"):
        H.check(name in services, "compose.yaml has no %s service" % name)
    H.check("grafana" in services["grafana"].get("profiles", []), "grafana should be optional (a profile)")
    H.check("politeproxy-ca" in (compose.get("volumes") or {}), "compose.yaml declares no politeproxy-ca volume")
    for name in ("proxy-a", "proxy-b"):
        s = services[name]
        mounts = s["volumes"]
        H.check("politeproxy-ca:/var/lib/politeproxy/ca:ro" in mounts, "%s does not mount the CA volume read-only" % name)
        H.check(any(m.startswith("./politeproxy-fleet.yaml:") for m in mounts), "%s does not run the fleet config" % name)
        H.check("./users.htpasswd:/etc/politeproxy/users.htpasswd:ro" in mounts, "%s has no proxy users" % name)
        H.check(s["depends_on"]["ca"]["condition"] == "service_completed_successfully",
                "%s must wait for the ca service" % name)
    ports = [p for s in services.values() for p in s.get("ports", [])]
    H.check(ports and all(p.startswith("127.0.0.1:") for p in ports), "a published port is not on loopback: %s" % ports)
    H.check("politeproxy-ca:/var/lib/politeproxy/ca" in services["ca"]["volumes"], "the ca service writes elsewhere")
    for m in services["grafana"]["volumes"]:
        src = os.path.normpath(os.path.join(COMPOSE, m.split(":")[0]))
        H.check(os.path.exists(src), "grafana mounts %s, which does not exist" % src)

    # The fleet config, with a CA of this test's own in place of the volume's.
    cert, key = t.gen_ca()
    with open(os.path.join(COMPOSE, "politeproxy-fleet.yaml")) as f:
        text = (f.read().replace("/var/lib/politeproxy/ca/ca.pem", cert).replace("/var/lib/politeproxy/ca/ca.key", key)
                .replace("/etc/politeproxy/users.htpasswd", os.path.join(COMPOSE, "users.htpasswd")))
    code, out, err, _, _ = t.check_config(text, name="fleet")
    H.check(code == 0, "conf/compose/politeproxy-fleet.yaml fails --check-config: %s %s" % (out, err))
    # The image's own config: listening beyond loopback, it needs the users file it names.
    with open(os.path.join(REPO, "conf", "politeproxy.docker.yaml")) as f:
        text = f.read().replace("/etc/politeproxy/users.htpasswd", os.path.join(COMPOSE, "users.htpasswd"))
    code, out, err, _, _ = t.check_config(text, name="docker")
    H.check(code == 0, "conf/politeproxy.docker.yaml fails --check-config: %s %s" % (out, err))
    if shutil.which("promtool"):
        r = subprocess.run(["promtool", "check", "config", os.path.join(COMPOSE, "prometheus.yml")],
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=30)
        H.check(r.returncode == 0, "promtool check config prometheus.yml: %s" % r.stdout)
    for f in ("datasource.yaml", "dashboards.yaml"):
        with open(os.path.join(COMPOSE, "grafana", f)) as fh:
            H.check(yaml.safe_load(fh).get("apiVersion") == 1, "grafana/%s is not a provisioning file" % f)


def engine():
    """('docker'|'buildah', why) or (None, why not)."""
    if shutil.which("docker"):
        r = subprocess.run(["docker", "info"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, timeout=30)
        if r.returncode == 0:
            return "docker", "docker daemon answers"
        why = "docker has no daemon (%s)" % r.stderr.strip().splitlines()[-1:]
    else:
        why = "no docker"
    if shutil.which("buildah"):
        r = subprocess.run(["buildah", "images", "--format", "{{.Name}}:{{.Tag}}"], stdout=subprocess.PIPE,
                           stderr=subprocess.DEVNULL, text=True, timeout=60, env=BUILDAH_ENV)
        if "docker.io/library/debian:12-slim" in r.stdout.split():
            return "buildah", "buildah with the debian:12 base images"
        return None, why + "; buildah has no debian:12-slim base image (no registry: ../shared/tools/container-base.sh builds one)"
    return None, why + "; no buildah"


def run_image(t, kind):
    build = {"docker": ["docker", "build", "-t", IMAGE, REPO],
             # --format docker: the OCI format has no HEALTHCHECK
             "buildah": ["buildah", "bud", "--isolation", "chroot", "--pull-never", "--format", "docker", "-t", IMAGE,
                         REPO]}[kind]
    H.log("building the image: %s" % " ".join(build))
    r = subprocess.run(build, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=3000, env=BUILDAH_ENV)
    H.check(r.returncode == 0, "the image does not build:\n%s" % r.stdout[-3000:])
    inspect = (["docker", "image", "inspect", IMAGE] if kind == "docker"
               else ["buildah", "inspect", "--type", "image", IMAGE])
    info = json.loads(subprocess.run(inspect, stdout=subprocess.PIPE, text=True, check=True, env=BUILDAH_ENV).stdout)
    config = info[0]["Config"] if kind == "docker" else info["Docker"]["config"]
    H.check((config.get("Healthcheck") or {}).get("Test", [None])[1:] == healthcheck_command(dockerfile()),
            "the image carries no HEALTHCHECK, or another one: %s" % config.get("Healthcheck"))
    H.check(config.get("User") == "politeproxy", "the image runs as %r, not politeproxy" % config.get("User"))
    port, admin = H.free_port(), H.free_port()
    args = ["--listen", "127.0.0.1:%d" % port, "--admin-listen", "127.0.0.1:%d" % admin]
    # The image's config names a users file the operator mounts (README: the image).
    users = "%s:/etc/politeproxy/users.htpasswd:ro" % os.path.join(COMPOSE, "users.htpasswd")
    ctr = None
    if kind == "docker":
        cmd = ["docker", "run", "--rm", "--network", "host", "-v", users, IMAGE] + args
    else:
        ctr = subprocess.run(["buildah", "from", "--pull-never", IMAGE], stdout=subprocess.PIPE, text=True,
                             check=True, env=BUILDAH_ENV).stdout.strip()
        cmd = ["buildah", "run", "--isolation", "chroot", "-v", users, ctr, "--", "/usr/local/bin/politeproxy",
               "--config", "/etc/politeproxy/politeproxy.yaml"] + args
    p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, preexec_fn=H._pdeathsig,
                         env=BUILDAH_ENV)
    try:
        import urllib.request

        def ready():
            try:
                with urllib.request.urlopen("http://127.0.0.1:%d/readyz" % admin, timeout=1) as res:
                    return res.status == 200
            except OSError:
                return False
        H.check(H.wait_until(ready, 30, interval=0.2), "the container never answered /readyz")
        H.log("the image runs and answers /readyz")
    finally:
        p.terminate()
        try:
            p.wait(20)
        except subprocess.TimeoutExpired:
            p.kill()
        if ctr:
            subprocess.run(["buildah", "rm", ctr], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=BUILDAH_ENV)


def test(t):
    text = dockerfile()
    check_runtime_libraries(t.binary, runtime_packages(text))

    health = healthcheck_command(text)
    proxy = t.proxy(H.base_config())
    probe = [a.replace("/9464", "/%d" % proxy.admin_port) for a in health]
    r = subprocess.run(probe, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=10)
    H.check(r.returncode == 0, "the HEALTHCHECK command fails against a ready proxy: %s %s" % (probe, r.stdout))
    proxy.stop()
    r = subprocess.run(probe, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=10)
    H.check(r.returncode != 0, "the HEALTHCHECK command passes with no proxy: %s" % probe)

    check_compose(t)

    kind, why = engine()
    if kind is None:
        print("SKIP building and running the image: %s" % why, flush=True)
        return
    run_image(t, kind)


if __name__ == "__main__":
    H.main(test, timeout=3300)
