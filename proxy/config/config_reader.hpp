#pragma once
// The YAML walker the configuration loaders share (private to proxy/config/): every value
// read checked, every error thrown with the file and line (caught by load_config_text).
#include "politeproxy/config/config_load.hpp"

#include "politeproxy/base/duration.hpp"

#include <yaml-cpp/yaml.h>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmath>
#include <initializer_list>
#include <string>
#include <string_view>
#include <vector>

namespace politeproxy::config_detail {

struct load_error {
    std::string message;
};

// Walks the YAML tree; every error carries file:line.
class config_reader {
public:
    explicit config_reader(std::string source) : source_(std::move(source)) {}

    [[noreturn]] void fail(const YAML::Node& at, const std::string& what) const {
        throw load_error{source_ + ":" + std::to_string(at.Mark().line + 1) + ": " + what};
    }

    void expect_map(const YAML::Node& n, std::string_view what) const {
        if (!n.IsMap()) fail(n, std::string(what) + " must be a mapping");
    }

    void only_keys(const YAML::Node& map, std::string_view where,
                   std::initializer_list<std::string_view> allowed) const {
        for (const auto& kv : map) {
            const auto key = kv.first.as<std::string>();
            bool known = false;
            for (auto a : allowed) known = known || a == key;
            if (!known) fail(kv.first, "unknown key '" + key + "' in " + std::string(where));
        }
    }

    std::string text(const YAML::Node& n, std::string_view what) const {
        if (!n.IsScalar()) fail(n, std::string(what) + " must be a scalar");
        return n.Scalar();
    }

    double number(const YAML::Node& n, std::string_view what) const {
        const std::string s = text(n, what);
        char* end = nullptr;
        const double v = std::strtod(s.c_str(), &end);
        if (s.empty() || *end != '\0' || !std::isfinite(v))
            fail(n, std::string(what) + " must be a number, got '" + s + "'");
        return v;
    }

    double positive(const YAML::Node& n, std::string_view what) const {
        const double v = number(n, what);
        if (v <= 0) fail(n, std::string(what) + " must be positive");
        return v;
    }

    std::size_t count(const YAML::Node& n, std::string_view what, std::size_t min) const {
        const double v = number(n, what);
        if (v != std::floor(v) || v < static_cast<double>(min) || v > 1e9)
            fail(n, std::string(what) + " must be a whole number >= " + std::to_string(min));
        return static_cast<std::size_t>(v);
    }

    clock::duration duration(const YAML::Node& n, std::string_view what) const {
        const std::string s = text(n, what);
        const auto d = parse_duration(s);
        if (!d) fail(n, std::string(what) + " must be a duration like 500ms, 30s, 10m or 1h, got '" + s + "'");
        return *d;
    }

    bool boolean(const YAML::Node& n, std::string_view what) const {
        const std::string s = text(n, what);
        if (s == "true") return true;
        if (s == "false") return false;
        fail(n, std::string(what) + " must be true or false");
    }

    listen_address address(const YAML::Node& n, std::string_view what) const {
        auto a = parse_listen_address(text(n, what));
        if (!a) fail(n, std::string(what) + ": " + a.error());
        return *a;
    }

    std::vector<ip_network> networks(const YAML::Node& n, std::string_view what) const {
        std::vector<ip_network> out;
        if (n.IsNull()) return out;
        if (!n.IsSequence()) fail(n, std::string(what) + " must be a list");
        for (const auto& item : n)
            if (auto bad = address_filter::expand(text(item, what), out))
                fail(item, std::string(what) + ": '" + *bad + "' is not a network or a known class");
        return out;
    }

    /// A secret file's text (a parent's credentials, the admin tokens), named by the path
    /// `n` holds: a regular file nobody but its owner may read (mode 0600 or stricter),
    /// checked on the descriptor it is then read through, at most 1 MiB.
    std::string private_file(const YAML::Node& n, std::string_view what) const {
        const std::string path = text(n, what);
        const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
        if (fd < 0) fail(n, std::string(what) + ": cannot open " + path);
        struct stat st {};
        std::string out;
        const char* wrong = ::fstat(fd, &st) != 0 ? "cannot be read"
                            : !S_ISREG(st.st_mode) ? "is not a file"
                            : (st.st_mode & 077)   ? "is readable by others (chmod 600)"
                                                   : nullptr;
        if (!wrong) {
            char buf[4096];
            for (ssize_t n_read; (n_read = ::read(fd, buf, sizeof buf)) > 0 && out.size() < (1u << 20);)
                out.append(buf, static_cast<std::size_t>(n_read));
        }
        ::close(fd);
        if (wrong) fail(n, std::string(what) + ": " + path + " " + wrong);
        return out;
    }

    const std::string& source() const { return source_; }

private:
    std::string source_;
};

/// parents: and routes: (SPEC.md), into c.parents and c.routes.
void load_parents(const config_reader& r, const YAML::Node& parents, const YAML::Node& routes, config& c);
/// clients: (proxy/config/clients_load.cpp); after security (identify_by: user needs its users_file).
void load_clients(const config_reader& r, const YAML::Node& clients, config& c);

}  // namespace politeproxy::config_detail
