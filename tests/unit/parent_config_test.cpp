// parents: and routes: as the loader reads them (SPEC.md "Configuration").
#include "config_loading.hpp"
#include "politeproxy/config/config_load.hpp"

#include <doctest/doctest.h>

#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>

using namespace politeproxy;
using namespace std::chrono_literals;

namespace {

using testing::load_error;
using testing::load_ok;

}  // namespace

TEST_CASE("parents: a URL with credentials, the SPEC defaults, and each field read") {
    const config c = load_ok(R"(
parents:
  pool-a:
    url: http://user:p%40ss@127.0.0.1:3129/
  pool-b:
    url: http://[::1]:8080
    max_connections: 8
    weight: 3
    retry_after: 2s
    fail_after: 1
)");
    REQUIRE(c.parents.size() == 2);
    const parent_config& a = c.parents[0];
    CHECK(a.name == "pool-a");
    CHECK(a.host == "127.0.0.1");
    CHECK(a.port == 3129);
    CHECK(a.authorization == "Basic dXNlcjpwQHNz");  // base64("user:p@ss")
    CHECK(a.max_connections == 256);
    CHECK(a.weight == 1);
    CHECK(a.retry_after == 30s);
    CHECK(a.fail_after == 3);
    const parent_config& b = c.parents[1];
    CHECK(b.host == "::1");
    CHECK(b.authority() == "[::1]:8080");
    CHECK(b.authorization.empty());
    CHECK(b.max_connections == 8);
    CHECK(b.weight == 3);
    CHECK(b.retry_after == 2s);
    CHECK(b.fail_after == 1);
}

TEST_CASE("parents: a URL that is not http://host:port is refused with its line") {
    for (const char* url : {"https://127.0.0.1:3129", "http://127.0.0.1", "http://127.0.0.1:0", "http://127.0.0.1:70000",
                            "http://a b:1", "http://127.0.0.1:3129/path", "http://user@127.0.0.1:1", "http://[::1:1"}) {
        const std::string error = load_error(std::string("parents:\n  p:\n    url: \"") + url + "\"\n");
        CHECK(error.find("test.yaml:3: parent p.url") == 0);
    }
    CHECK(load_error("parents:\n  direct:\n    url: http://127.0.0.1:1\n").find("'direct'") != std::string::npos);
    CHECK(load_error("parents:\n  p:\n    weight: 1\n").find("'url' is required") != std::string::npos);
    CHECK(load_error("parents:\n  p:\n    url: http://127.0.0.1:1\n    colour: red\n").find("unknown key 'colour'") !=
          std::string::npos);
}

TEST_CASE("parents: credentials from a file of mode 0600, never from both places") {
    char path[] = "/tmp/parent-credentials-XXXXXX";
    const int fd = mkstemp(path);
    REQUIRE(fd >= 0);
    ::close(fd);
    { std::ofstream(path) << "crawler:s3cret\n"; }
    ::chmod(path, 0600);
    const std::string yaml = std::string("parents:\n  p:\n    url: http://127.0.0.1:3129\n    credentials_file: ") + path + "\n";
    CHECK(load_ok(yaml).parents[0].authorization == "Basic Y3Jhd2xlcjpzM2NyZXQ=");
    ::chmod(path, 0644);
    CHECK(load_error(yaml).find("readable by others") != std::string::npos);
    ::chmod(path, 0600);
    CHECK(load_error(std::string("parents:\n  p:\n    url: http://u:p@127.0.0.1:3129\n    credentials_file: ") + path + "\n")
              .find("both") != std::string::npos);
    std::remove(path);
}

TEST_CASE("routes: names, *.suffixes and networks; via parents or direct; the picks") {
    const config c = load_ok(R"(
parents:
  a: {url: "http://127.0.0.1:3129"}
  b: {url: "http://127.0.0.1:3130"}
routes:
  - match: ["*.Example.COM", "api.test", "203.0.113.0/24", "2001:db8::/32"]
    via: [b, a]
    pick: by_host
  - match: ["10.1.2.3"]
    via: [direct]
)");
    REQUIRE(c.routes.size() == 2);
    const parent_route& r = c.routes[0];
    CHECK(r.names == std::vector<std::string>{"*.example.com", "api.test"});
    CHECK(r.networks.size() == 2);
    CHECK(r.via == std::vector<std::size_t>{1, 0});
    CHECK(r.pick == parent_route::pick_kind::by_host);
    CHECK(c.routes[1].via == std::vector<std::size_t>{parent_route::direct});
    CHECK(c.routes[1].pick == parent_route::pick_kind::round_robin);
    CHECK(describe(c, utc_today()).find("# route (line 6): *.example.com api.test 203.0.113.0/24 2001:db8::/32 -> via b a pick=by_host") !=
          std::string::npos);
}

TEST_CASE("routes: a route names only parents that exist, and a pick the proxy knows") {
    CHECK(load_error("routes:\n  - match: [a.test]\n    via: [nowhere]\n").find("test.yaml:3: routes.via: no parent named 'nowhere'") == 0);
    CHECK(load_error("routes:\n  - match: [a.test]\n").find("needs 'via'") != std::string::npos);
    CHECK(load_error("routes:\n  - via: [direct]\n").find("needs 'match'") != std::string::npos);
    CHECK(load_error("routes:\n  - match: [\"a b\"]\n    via: [direct]\n").find("not a host name") != std::string::npos);
    CHECK(load_error("routes:\n  - match: [10.0.0.0/33]\n    via: [direct]\n").find("not a network") != std::string::npos);
    CHECK(load_error("routes:\n  - match: [a.test]\n    via: [direct]\n    pick: random\n").find("routes.pick") !=
          std::string::npos);
}
