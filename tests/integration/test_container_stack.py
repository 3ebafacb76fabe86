#!/usr/bin/python3
"""The container image and the compose stack (Dockerfile, conf/compose/), checked without
an engine, and built and run where one exists:
  - the image's runtime stage installs every Debian package the built binary links
    (ldd, then dpkg -S: nothing missing at run time);
  - the image's configs (every conf/*.yaml the Dockerfile copies): the default, the one the
    ENTRYPOINT names, passes --check-config exactly as shipped, names no file the image does
    not contain (a plain `docker run politeproxy` needs no mount), admits loopback only, and
    run as the image runs it, answers a proxy request without asking for credentials;
    politeproxy-users.yaml and politeproxy-intercept.yaml validate with a users file (and a
    CA), refuse to load without users (an open proxy), require credentials (407) when run
    after the default (`--config` appended: the last wins), and every file they name that
    the image lacks is a mount documented in the Dockerfile header and README's "Run it in
    a container", which says how a user builds and runs the image, and nothing of the build
    machine;
  - its HEALTHCHECK command answers 0 against the default config's /readyz and fails once
    the proxy is gone;
  - compose.yaml: Redis, the ca service, two proxies sharing the CA volume (read-only), the
    users file and the fleet config, Prometheus scraping both admin listeners, Grafana under
    a profile with the dashboard provisioned; every published port on loopback; the fleet
    config passes --check-config (with a CA from --gen-ca), prometheus.yml passes
    `promtool check config`;
  - with `docker` (a daemon answering) or `buildah` (and the debian:12 base images): the
    image builds, --check-config passes inside it, it runs with no mount at all and answers
    /readyz and a proxy request, and with a users file and politeproxy-users.yaml it asks
    for credentials (407). Without either, that part says so and is skipped.

For developers: on a machine without a registry, buildah needs the debian:12 and
debian:12-slim base images in its store first; this project's build machine makes them with
../shared/tools/container-base.sh (a build-machine script, not part of the repository),
after which this test built the image in 2.7 min (buildah --format docker: OCI drops
HEALTHCHECK; 2026-12-04, before the image carried its loopback default).
Users build it with `docker build -t politeproxy .` (README: "Run it in a container")."""
import ipaddress
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


USERS_IN_IMAGE = "/etc/politeproxy/users.htpasswd"   # the mount point the image's users configs name
CA_IN_IMAGE = "/var/lib/politeproxy/ca"              # the CA volume's mount point
CREDENTIALS = "Basic " + __import__("base64").b64encode(b"crawler:change-me").decode()  # conf/compose/users.htpasswd


def runtime_stage(text):
    return text[text.rindex("\nFROM "):]


def image_files(text):
    """{path in the image: source in the repository} for what the runtime stage copies."""
    return {dst: src for src, dst in re.findall(r"^COPY (?:--from=\S+ )?(\S+) (/\S+)$", runtime_stage(text), re.M)}


def entrypoint(text):
    m = re.search(r"^ENTRYPOINT (\[.*\])$", text, re.M)
    H.check(m is not None, "the Dockerfile has no ENTRYPOINT [...]")
    return json.loads(m.group(1))


def named_paths(node):
    """Every absolute path a config names (users_file, ca_cert, ca_key, token_file, ...)."""
    if isinstance(node, dict):
        return [p for v in node.values() for p in named_paths(v)]
    if isinstance(node, list):
        return [p for v in node for p in named_paths(v)]
    return [node] if isinstance(node, str) and node.startswith("/") else []


def readme_container_section():
    with open(os.path.join(REPO, "README.md")) as f:
        readme = f.read()
    start = readme.find("\n## Run it in a container\n")
    H.check(start >= 0, "README.md has no '## Run it in a container' section")
    end = readme.find("\n## ", start + 1)
    return readme, readme[start:end]


def is_loopback(address):
    """ADDR:PORT on loopback."""
    return ipaddress.ip_address(address.rsplit(":", 1)[0].strip("[]")).is_loopback


def within_loopback(network):
    n = ipaddress.ip_network(network, strict=False)
    return n.subnet_of(ipaddress.ip_network("127.0.0.0/8" if n.version == 4 else "::1/128"))


def map_to_host(text, ca_dir=None):
    """A config of the image with the files it names replaced by this test's own."""
    text = text.replace(USERS_IN_IMAGE, os.path.join(COMPOSE, "users.htpasswd"))
    return text.replace(CA_IN_IMAGE, ca_dir) if ca_dir else text


def check_image_configs(t):
    """The configs the image carries: the default needs nothing mounted, the others need what
    they say, and the user's documentation says so. Returns the default config's text."""
    text = dockerfile()
    files = image_files(text)
    configs = {dst: src for dst, src in files.items() if src.startswith("conf/") and src.endswith(".yaml")}
    entry = entrypoint(text)
    H.check("--config" in entry, "the ENTRYPOINT names no --config: %s" % entry)
    default = entry[entry.index("--config") + 1]
    H.check(default in configs, "the ENTRYPOINT's config %s is not a conf/*.yaml the image copies: %s" % (default, configs))
    header = text[:text.index("\nFROM ")]
    readme, section = readme_container_section()
    for word in ("container-base", "buildah", "../shared"):
        H.check(word not in header, "the Dockerfile's user instructions mention %r (a build-machine detail)" % word)
        H.check(word not in section, "README's 'Run it in a container' mentions %r (a build-machine detail)" % word)
    H.check("container-base" not in readme, "README.md points users at the build machine's container-base.sh")
    H.check("docker build -t politeproxy ." in section and "docker build -t politeproxy ." in header,
            "README's container section and the Dockerfile header should say `docker build -t politeproxy .`")
    H.check("--gen-ca %s" % CA_IN_IMAGE in section, "README's container section does not show --gen-ca into the CA volume")
    ca_dir = os.path.dirname(test_ca(t)[0])
    texts = {}
    for dst, src in sorted(configs.items()):
        with open(os.path.join(REPO, src)) as f:
            texts[dst] = f.read()
        paths = named_paths(yaml.safe_load(texts[dst]))
        missing = [p for p in paths if p not in files]
        if dst == default:
            # A plain `docker run politeproxy`: nothing mounted, nothing missing, no open proxy.
            H.check(not missing, "the image's default config %s names files the image lacks: %s" % (src, missing))
            cfg = yaml.safe_load(texts[dst])
            H.check(is_loopback(cfg["listen"]) and is_loopback(cfg["admin_listen"]),
                    "the default config should listen on loopback only: %s, %s" % (cfg["listen"], cfg["admin_listen"]))
            H.check(all(within_loopback(n) for n in cfg["security"]["allow_clients"]),
                    "the default config should admit loopback clients only: %s" % cfg["security"]["allow_clients"])
            code, out, err = check_config_file(t, os.path.join(REPO, src))
            H.check(code == 0, "%s (the image's default) fails --check-config as shipped: %s %s" % (src, out, err))
            H.log("%s -> %s: the default, validates as shipped, names no file to mount" % (src, dst))
            continue
        H.check(dst in header and dst in section, "%s is not documented in the Dockerfile header and README" % dst)
        H.check("--config %s" % dst in section, "README does not show how to select %s (--config)" % dst)
        for p in missing:
            # Every file the image lacks is a documented mount: the file, or its volume.
            H.check(p.startswith(USERS_IN_IMAGE) or p.startswith(CA_IN_IMAGE + "/"),
                    "%s names %s, neither in the image nor a documented mount" % (src, p))
            target = USERS_IN_IMAGE if p == USERS_IN_IMAGE else CA_IN_IMAGE
            for where, doc in (("the Dockerfile header", header), ("README", section), (src, texts[dst])):
                H.check(":%s:ro" % target in doc, "%s does not show %s mounted (-v ...:%s:ro)" % (where, target, target))
        H.check(USERS_IN_IMAGE in paths, "%s (not the default) should need proxy users" % src)
        mapped = map_to_host(texts[dst], ca_dir)
        code, out, err, _, _ = t.check_config(mapped, name=os.path.basename(dst)[:-5])
        H.check(code == 0, "%s fails --check-config with a users file%s: %s %s"
                % (src, " and a CA" if CA_IN_IMAGE in texts[dst] else "", out, err))
        open_text = re.sub(r"^\s*users_file:.*\n", "", mapped, flags=re.M)
        code, out, err, _, _ = t.check_config(open_text, name="open")
        H.check(code == 1 and "open proxy" in err, "%s without users_file should be refused as an open proxy: %s %s"
                % (src, code, err))
        H.log("%s -> %s: validates with %s mounted, refused as an open proxy without users"
              % (src, dst, " and ".join(sorted({USERS_IN_IMAGE if p == USERS_IN_IMAGE else CA_IN_IMAGE for p in missing}))))
    H.check(any(USERS_IN_IMAGE in named_paths(yaml.safe_load(v)) and CA_IN_IMAGE not in v for v in texts.values()),
            "the image carries no users-file config for published ports")

    # Run them as the image does (ENTRYPOINT, then what `docker run IMAGE ...` appends), on
    # this host: the default serves without credentials, the users config after it asks.
    users_dst = [d for d, v in texts.items() if d != default and CA_IN_IMAGE not in v][0]
    users_path = os.path.join(t.workdir, "image-users-mapped.yaml")
    with open(users_path, "w") as f:
        f.write(map_to_host(texts[users_dst]))
    proxy = t.proxy(texts[default], name="image-default")
    r = H.request(proxy, "http://127.0.0.1:9/")
    H.check(r.status == 403 and r.header("Proxy-Authenticate") is None,
            "the default config should answer a loopback client without credentials (403: loopback destination), "
            "got %s %s" % (r.status, r.error))
    proxy.stop()
    proxy = t.proxy(texts[default], name="image-then-users", extra_args=("--config", users_path))
    # A destination the deny list cannot judge without DNS (a loopback one is refused
    # before the credentials are asked for): the credentials come first.
    r = H.request(proxy, "http://example.invalid/")
    H.check(r.status == 407, "%s after the default (the last --config wins) should ask for credentials, got %s %s"
            % (users_dst, r.status, r.error))
    r = H.request(proxy, "http://127.0.0.1:9/", headers={"Proxy-Authorization": CREDENTIALS})
    H.check(r.status == 403, "%s with conf/compose/users.htpasswd's user: 403 (loopback destination) expected, got %s %s"
            % (users_dst, r.status, r.error))
    proxy.stop()
    H.log("run as the image runs them: the default answers without credentials, %s asks (407)" % users_dst)
    return texts[default]


def test_ca(t):
    """One CA from --gen-ca for every config here that intercepts: (ca.pem, ca.key)."""
    if not hasattr(t, "container_stack_ca"):
        t.container_stack_ca = t.gen_ca()
    return t.container_stack_ca


def check_config_file(t, path):
    r = subprocess.run([t.binary, "--check-config", path], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, text=True, timeout=20)
    return r.returncode, r.stdout, r.stderr


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
    cert, key = test_ca(t)
    with open(os.path.join(COMPOSE, "politeproxy-fleet.yaml")) as f:
        text = (f.read().replace("/var/lib/politeproxy/ca/ca.pem", cert).replace("/var/lib/politeproxy/ca/ca.key", key)
                .replace("/etc/politeproxy/users.htpasswd", os.path.join(COMPOSE, "users.htpasswd")))
    code, out, err, _, _ = t.check_config(text, name="fleet")
    H.check(code == 0, "conf/compose/politeproxy-fleet.yaml fails --check-config: %s %s" % (out, err))
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
    users = "%s:%s:ro" % (os.path.join(COMPOSE, "users.htpasswd"), USERS_IN_IMAGE)
    users_config = [dst for dst, src in image_files(dockerfile()).items() if src == "conf/politeproxy.docker-users.yaml"]
    H.check(len(users_config) == 1, "the image does not carry conf/politeproxy.docker-users.yaml")
    ctr = None
    if kind == "buildah":
        ctr = subprocess.run(["buildah", "from", "--pull-never", IMAGE], stdout=subprocess.PIPE, text=True,
                             check=True, env=BUILDAH_ENV).stdout.strip()

    def command(mounts, args):
        """What `docker run [mounts] IMAGE args` runs, on the host's network (buildah run
        with chroot isolation shares it): the ENTRYPOINT, then args."""
        if kind == "docker":
            return (["docker", "run", "--rm", "--network", "host"] + [a for m in mounts for a in ("-v", m)]
                    + [IMAGE] + args)
        return (["buildah", "run", "--isolation", "chroot"] + [a for m in mounts for a in ("-v", m)]
                + [ctr, "--"] + entrypoint(dockerfile()) + args)

    try:
        # --check-config inside the image, on the default as it ships.
        r = subprocess.run(command([], ["--check-config", "/etc/politeproxy/politeproxy.yaml"]), stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, text=True, timeout=120, env=BUILDAH_ENV)
        H.check(r.returncode == 0, "--check-config of the image's default config fails inside the image: %s" % r.stdout)
        # A plain run (no mount; loopback addresses of this test's own on the shared network),
        # then the users config with a users file mounted.
        for mounts, extra, want in (([], [], 403), ([users], ["--config", users_config[0]], 407)):
            port, admin = H.free_port(), H.free_port()
            cmd = command(mounts, extra + ["--listen", "127.0.0.1:%d" % port, "--admin-listen", "127.0.0.1:%d" % admin])
            H.log("running the image: %s" % " ".join(cmd))
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
                H.check(H.wait_until(ready, 30, interval=0.2), "the container (%s) never answered /readyz" % extra)

                class At:  # H.request needs only .port
                    pass
                at = At()
                at.port = port
                r = H.request(at, "http://127.0.0.1:9/")
                H.check(r.status == want, "the container (%s) answered a proxy request %s, not %d" % (extra, r.status, want))
                H.log("the image runs %s: /readyz, and a proxy request gets %d" % (" ".join(extra) or "with no mount", want))
            finally:
                p.terminate()
                try:
                    p.wait(20)
                except subprocess.TimeoutExpired:
                    p.kill()
    finally:
        if ctr:
            subprocess.run(["buildah", "rm", ctr], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=BUILDAH_ENV)


def test(t):
    text = dockerfile()
    check_runtime_libraries(t.binary, runtime_packages(text))

    default_text = check_image_configs(t)

    # The HEALTHCHECK probes the default config's admin listener, inside the container.
    health = healthcheck_command(text)
    admin = yaml.safe_load(default_text)["admin_listen"]
    H.check(any("/dev/tcp/%s" % admin.replace(":", "/") in a for a in health),
            "the HEALTHCHECK does not probe the default config's admin_listen %s: %s" % (admin, health))
    proxy = t.proxy(default_text, name="image-health")
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
