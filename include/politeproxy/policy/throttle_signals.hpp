#pragma once
// What counts as "slow down" in an origin's answer (defaults.throttle, per host):
// statuses (429 and 503 unless configured) and header fields whose value matches a
// pattern (a CDN's challenge page: `cf-mitigated: challenge`). The health controller
// treats a match as throttling: collapse to 1, halve the rate, pause (SPEC.md).
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace politeproxy {

class throttle_signals {
public:
    /// One `headers:` entry: a field (name in lower case) whose value matches `pattern`
    /// (ECMAScript, searched anywhere in the value, case-sensitive).
    struct header_rule {
        std::string name;
        std::string pattern;
        std::shared_ptr<const struct compiled_pattern> compiled;
        bool operator==(const header_rule& o) const { return name == o.name && pattern == o.pattern; }
    };

    /// The defaults: 429 and 503, no header.
    throttle_signals() = default;
    throttle_signals(std::vector<unsigned> statuses, std::vector<header_rule> headers)
        : statuses_(std::move(statuses)), headers_(std::move(headers)) {}

    /// A header rule for `name` (any case) and `pattern`; the error text for a pattern
    /// that does not compile.
    static std::optional<std::string> make_rule(std::string_view name, std::string_view pattern, header_rule& out);

    /// Whether an answer with `status` and fields `field_value(lower_case_name)` (the
    /// first value of that name, empty when absent) says "slow down".
    template <class FieldValue>
    bool heard(unsigned status, FieldValue&& field_value) const {
        for (unsigned s : statuses_)
            if (s == status) return true;
        for (const header_rule& rule : headers_)
            if (const std::string_view value = field_value(std::string_view(rule.name)); matches(rule, value)) return true;
        return false;
    }

    const std::vector<unsigned>& statuses() const { return statuses_; }
    const std::vector<header_rule>& headers() const { return headers_; }
    bool operator==(const throttle_signals&) const = default;

    /// At most this much of a field's value is matched (origins' bytes are hostile).
    static constexpr std::size_t max_matched_bytes = 1024;

private:
    static bool matches(const header_rule& rule, std::string_view value);

    std::vector<unsigned> statuses_{429, 503};
    std::vector<header_rule> headers_;
};

}  // namespace politeproxy
