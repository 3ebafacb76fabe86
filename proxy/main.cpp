// politeproxy: a forward HTTP proxy that makes any crawler polite.
#include "politeproxy/config/config_load.hpp"
#include "politeproxy/base/log.hpp"
#include "politeproxy/server/proxy_server.hpp"
#include "politeproxy/tls/certificate_authority.hpp"
#include "politeproxy/tls/config_check.hpp"

#include <cstdio>
#include <cstring>
#include <exception>
#include <iostream>
#include <optional>
#include <string>

#include <sys/resource.h>
#include <unistd.h>

namespace {

constexpr const char* usage =
    "usage: politeproxy --config FILE [--listen ADDR:PORT] [--admin-listen ADDR:PORT]\n"
    "                   [--log-level trace|debug|info|warn|error]\n"
    "       politeproxy --check-config FILE   validate, print the effective per-host table\n"
    "       politeproxy --gen-ca DIR          write DIR/ca.pem and DIR/ca.key (mode 0600) for tls.mode intercept\n"
    "       politeproxy --version | --help\n";

}  // namespace

int main(int argc, char** argv) {
    using namespace politeproxy;
    std::string config_path, check_path, listen, admin_listen, ca_dir;
    log_level level = log_level::info;
    for (int i = 1; i < argc; ++i) {
        const std::string arg = argv[i];
        auto value = [&](std::string& out) {
            if (i + 1 >= argc) {
                std::fprintf(stderr, "politeproxy: %s needs a value\n%s", arg.c_str(), usage);
                std::exit(2);
            }
            out = argv[++i];
        };
        if (arg == "--help" || arg == "-h") {
            std::fputs(usage, stdout);
            return 0;
        } else if (arg == "--version") {
            std::printf("politeproxy %s\n", POLITEPROXY_VERSION);
            return 0;
        } else if (arg == "--config") value(config_path);
        else if (arg == "--check-config") value(check_path);
        else if (arg == "--gen-ca") value(ca_dir);
        else if (arg == "--listen") value(listen);
        else if (arg == "--admin-listen") value(admin_listen);
        else if (arg == "--log-level") {
            std::string text;
            value(text);
            if (!parse_log_level(text, level)) {
                std::fprintf(stderr, "politeproxy: unknown log level '%s'\n", text.c_str());
                return 2;
            }
        } else {
            std::fprintf(stderr, "politeproxy: unknown argument '%s'\n%s", arg.c_str(), usage);
            return 2;
        }
    }

    if (!ca_dir.empty()) {
        char host[256] = {};
        ::gethostname(host, sizeof host - 1);
        if (auto error = tls::generate_ca(ca_dir, host)) {
            std::fprintf(stderr, "politeproxy: %s\n", error->c_str());
            return 1;
        }
        std::printf("politeproxy: wrote %s/ca.pem and %s/ca.key (mode 0600); trust ca.pem in your crawler\n",
                    ca_dir.c_str(), ca_dir.c_str());
        return 0;
    }
    // --listen / --admin-listen over the file, then the rule that needs the final
    // addresses: no open proxy. 0 = go on; else the exit status.
    const auto apply_flags = [&](config& cfg) -> int {
        for (auto [flag, target] : {std::pair{&listen, &cfg.listen}, std::pair{&admin_listen, &cfg.admin_listen}}) {
            if (flag->empty()) continue;
            auto parsed = parse_listen_address(*flag);
            if (!parsed) {
                std::fprintf(stderr, "politeproxy: %s\n", parsed.error().c_str());
                return 2;
            }
            *target = *parsed;
        }
        if (const auto open = open_proxy_error(cfg)) {
            std::fprintf(stderr, "politeproxy: %s: %s\n", cfg.source.c_str(), open->c_str());
            return 1;
        }
        return 0;
    };
    if (!check_path.empty()) {
        auto cfg = tls::load_config_checked(check_path);
        if (!cfg) {
            std::fprintf(stderr, "politeproxy: %s\n", cfg.error().c_str());
            return 1;
        }
        if (const int status = apply_flags(*cfg)) return status;
        std::cout << describe(*cfg, utc_today());
        return 0;
    }
    if (config_path.empty()) {
        std::fputs(usage, stderr);
        return 2;
    }
    auto cfg = tls::load_config_checked(config_path);
    if (!cfg) {
        std::fprintf(stderr, "politeproxy: %s\n", cfg.error().c_str());
        return 1;
    }
    if (const int status = apply_flags(*cfg)) return status;
    logger log(level);
    for (const auto& o : cfg->hosts)
        if (o.expired(utc_today()))
            log.write(log_level::warn, "config", "override for " + o.pattern + " expired: ignored");
    try {
        // Two descriptors per request in flight (client, origin) plus the idle pooled
        // ones: the whole hard limit, as HAProxy and nginx take it.
        if (rlimit files{}; getrlimit(RLIMIT_NOFILE, &files) == 0 && files.rlim_cur < files.rlim_max) {
            files.rlim_cur = files.rlim_max;
            setrlimit(RLIMIT_NOFILE, &files);
        }
        proxy_server server(config_path, std::make_shared<const config>(std::move(*cfg)), log);
        return server.run();
    } catch (const std::exception& e) {
        std::fprintf(stderr, "politeproxy: %s\n", e.what());
        return 1;
    }
}
