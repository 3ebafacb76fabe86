# politeproxy: build on Debian 12, run as a non-root user on a slim Debian 12.
#   docker build -t politeproxy .
#   docker run -v $PWD/users.htpasswd:/etc/politeproxy/users.htpasswd:ro -p 3128:3128 -p 9464:9464 politeproxy
# The baked-in config (conf/politeproxy.docker.yaml) listens on 0.0.0.0 inside the
# container for private-range clients, so it needs proxy users (the proxy refuses to be
# an open proxy): mount an htpasswd file (htpasswd -B -c users.htpasswd NAME). Override
# the addresses with --listen / --admin-listen (appended to the entrypoint), or mount
# your own file at /etc/politeproxy/politeproxy.yaml.
FROM debian:12 AS build
RUN apt-get update -qq \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
      g++ cmake ninja-build pkg-config libboost1.81-dev libboost-url1.81-dev libyaml-cpp-dev \
      prometheus-cpp-dev doctest-dev libssl-dev libnghttp2-dev libhiredis-dev libcrypt-dev libpsl-dev \
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
      libyaml-cpp0.7 libboost-url1.81.0 libprometheus-cpp-core1.0 libssl3 libnghttp2-14 libhiredis0.14 libpsl5 \
      publicsuffix \
      ca-certificates \
 && rm -rf /var/lib/apt/lists/* \
 && useradd --system --no-create-home --shell /usr/sbin/nologin politeproxy \
 && install -d -o politeproxy -g politeproxy -m 0700 /var/lib/politeproxy/ca
COPY --from=build /src/build/politeproxy /usr/local/bin/politeproxy
# Listens on the container's interfaces and admits private-range clients; see the file.
COPY conf/politeproxy.docker.yaml /etc/politeproxy/politeproxy.yaml
USER politeproxy
EXPOSE 3128 9464
# tls.mode intercept: the CA lives here (a volume; `politeproxy --gen-ca /var/lib/politeproxy/ca`
# writes ca.pem and ca.key, mode 0600, as this user). conf/compose/ shows it shared by a fleet.
# Ready = listening, configured and not draining: /readyz on the admin listener (bash's
# /dev/tcp: no HTTP client in the image). With --admin-listen elsewhere, override this.
HEALTHCHECK --interval=10s --timeout=3s --start-period=10s --retries=3 \
  CMD ["/bin/bash", "-c", "exec 3<>/dev/tcp/127.0.0.1/9464 && printf 'GET /readyz HTTP/1.0\\r\\n\\r\\n' >&3 && head -c 12 <&3 | grep -q ' 200'"]
ENTRYPOINT ["/usr/local/bin/politeproxy", "--config", "/etc/politeproxy/politeproxy.yaml"]
