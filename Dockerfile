# politeproxy: build on Debian 12, run as a non-root user (politeproxy) on a slim Debian 12.
#   docker build -t politeproxy .
#
# Three configs are baked in (README.md, "Run it in a container"); the last --config wins:
#   /etc/politeproxy/politeproxy.yaml            the default (conf/politeproxy.docker.yaml):
#       loopback only, nothing to mount. The proxy on the host's 127.0.0.1:3128, /readyz and
#       /metrics on 127.0.0.1:9464:
#         docker run --rm --network host politeproxy
#   /etc/politeproxy/politeproxy-users.yaml      published ports (conf/politeproxy.docker-users.yaml):
#       all interfaces, private-range clients, so proxy users are required: mount an htpasswd
#       file (htpasswd -B -c users.htpasswd NAME) at /etc/politeproxy/users.htpasswd:
#         docker run -d -p 127.0.0.1:3128:3128 -p 127.0.0.1:9464:9464 \
#           -v $PWD/users.htpasswd:/etc/politeproxy/users.htpasswd:ro \
#           politeproxy --config /etc/politeproxy/politeproxy-users.yaml
#   /etc/politeproxy/politeproxy-intercept.yaml  the same plus tls.mode intercept (conf/politeproxy.docker-intercept.yaml):
#       also mount the CA volume, written once with --gen-ca:
#         docker run --rm -v politeproxy-ca:/var/lib/politeproxy/ca politeproxy --gen-ca /var/lib/politeproxy/ca
#         docker run -d -p 127.0.0.1:3128:3128 -p 127.0.0.1:9464:9464 \
#           -v $PWD/users.htpasswd:/etc/politeproxy/users.htpasswd:ro -v politeproxy-ca:/var/lib/politeproxy/ca:ro \
#           politeproxy --config /etc/politeproxy/politeproxy-intercept.yaml
# Or mount your own file over /etc/politeproxy/politeproxy.yaml; check one with
#   docker run --rm politeproxy --check-config /etc/politeproxy/politeproxy.yaml
# --listen / --admin-listen (appended too) override the addresses.
FROM debian:12 AS build
RUN apt-get update -qq \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
      g++ cmake ninja-build pkg-config libboost1.81-dev libboost-url1.81-dev libyaml-cpp-dev \
      prometheus-cpp-dev doctest-dev libssl-dev libnghttp2-dev libhiredis-dev libcrypt-dev libpsl-dev libc-ares-dev \
      libgoogle-perftools-dev \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY CMakeLists.txt ./
COPY include include
COPY proxy proxy
COPY tests tests
RUN cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
 && cmake --build build -j 2 --target politeproxy \
 && strip build/politeproxy

FROM debian:12-slim
RUN apt-get update -qq \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
      libyaml-cpp0.7 libboost-url1.81.0 libprometheus-cpp-core1.0 libssl3 libnghttp2-14 libhiredis0.14 libpsl5 libc-ares2 \
      libtcmalloc-minimal4 \
      publicsuffix \
      ca-certificates \
 && rm -rf /var/lib/apt/lists/* \
 && useradd --system --no-create-home --shell /usr/sbin/nologin politeproxy \
 && install -d -o politeproxy -g politeproxy -m 0700 /var/lib/politeproxy/ca
COPY --from=build /src/build/politeproxy /usr/local/bin/politeproxy
# The default: loopback only, no users file, no CA (a plain `docker run politeproxy` starts).
COPY conf/politeproxy.docker.yaml /etc/politeproxy/politeproxy.yaml
# For published ports: need /etc/politeproxy/users.htpasswd mounted (and, intercepting, the CA volume).
COPY conf/politeproxy.docker-users.yaml /etc/politeproxy/politeproxy-users.yaml
COPY conf/politeproxy.docker-intercept.yaml /etc/politeproxy/politeproxy-intercept.yaml
USER politeproxy
EXPOSE 3128 9464
# tls.mode intercept: the CA lives here (a volume; `politeproxy --gen-ca /var/lib/politeproxy/ca`
# writes ca.pem and ca.key, mode 0600, as this user). conf/compose/ shows it shared by a fleet.
# Ready = listening, configured and not draining: /readyz on the admin listener (bash's
# /dev/tcp: no HTTP client in the image). With --admin-listen elsewhere, override this.
HEALTHCHECK --interval=10s --timeout=3s --start-period=10s --retries=3 \
  CMD ["/bin/bash", "-c", "exec 3<>/dev/tcp/127.0.0.1/9464 && printf 'GET /readyz HTTP/1.0\\r\\n\\r\\n' >&3 && head -c 12 <&3 | grep -q ' 200'"]
ENTRYPOINT ["/usr/local/bin/politeproxy", "--config", "/etc/politeproxy/politeproxy.yaml"]
