#pragma once
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace politeproxy {

/// The most of a robots.txt that is read: RFC 9309 asks crawlers to parse at least 500 KiB.
inline constexpr std::size_t robots_txt_max_bytes = 500 * 1024;

/// A robots.txt as read (RFC 9309): which paths a client may fetch, and the Crawl-delay
/// it is asked to keep.
///
/// Groups as RFC 9309 forms them: one or more `User-agent` lines, then rules; a
/// `User-agent` line after a rule starts a new group; lines before the first group,
/// comments, `Sitemap` lines and unknown keys are ignored; keys are case-insensitive;
/// lines end with CR, LF or CRLF; a leading UTF-8 byte order mark is skipped.
/// A group applies when its agent token (up to the first `/` or space) is,
/// case-insensitively, a word (a run of letters, digits, `-` and `_`) of the client's
/// User-Agent ("MyBot" in "Mozilla/5.0 (compatible; MyBot/2.1)"; RFC 9309 matches the
/// product token). The longest such token wins, and every group naming a matching token
/// of that length applies (merged, RFC 9309 2.2.1); otherwise the `*` groups apply
/// (merged); otherwise none. A matching group without rules allows everything and one
/// without a Crawl-delay asks none, whatever `*` says. Only the first 512 bytes of the
/// User-Agent are looked at.
///
/// Allow and Disallow (RFC 9309 2.2.2, 2.2.3): the most specific matching rule wins, the
/// one with the longest pattern in octets; between an Allow and a Disallow of equal length
/// Allow wins; no matching rule allows. A pattern matches from the start of the path
/// (path and query, as sent); `*` matches any run of octets, a final `$` the end of the
/// path (elsewhere `$` is an octet like any other). A rule whose value is empty or does
/// not start with `/` or `*` is ignored. Pattern and path are compared after the same
/// normalisation: octets >= 0x80, control octets and space are percent-encoded, the hex
/// digits of existing `%xx` escapes upper-cased, escapes of unreserved characters decoded
/// (RFC 3986 6.2.2.2): "/ツ", "/%e3%83%84" and "/%E3%83%84" are one path, "/%62" and "/b"
/// too, "/%2F" and "/" are two. `/robots.txt` is always allowed.
/// Crawl-delay is a decimal number of seconds (a non-standard line Bing, Yandex and Scrapy
/// honour); an unreadable one is ignored, several in the applicable groups give the longest.
///
/// Algorithm: parse() keeps the normalised patterns back to back in one string, the rules
/// group by group, and the agent tokens lower-cased and sorted, so a call looks up each
/// word of the User-Agent (O(words x log tokens)) rather than scanning the file. A pattern
/// is matched by finding its `*`-separated pieces, left to right, each at its leftmost
/// place after the previous one (leftmost leaves the most room for the rest, so no
/// backtracking): at most O(path x pattern) per rule, without recursion. Rules shorter
/// than the best match so far are not tried.
///
/// Sans-io. Immutable after parse(); const calls are safe from several threads.
class robots_rules {
public:
    /// No robots.txt (or a 4xx): everything allowed, no delay.
    robots_rules() = default;
    /// Reads a robots.txt; only the first robots_txt_max_bytes are read.
    static robots_rules parse(std::string_view text);
    /// For an unreachable robots.txt: every path but /robots.txt disallowed, no delay.
    static robots_rules disallow_all();

    /// Whether a client with `user_agent` may fetch `path` (the request target's path and
    /// query, origin-form, as sent: "/a/b?c=d"; empty means "/").
    bool allowed(std::string_view path, std::string_view user_agent) const;
    /// The Crawl-delay (seconds, > 0 and finite) asked of `user_agent`, if any.
    std::optional<double> crawl_delay(std::string_view user_agent) const;
    /// About how many bytes this holds (the owner bounds the memory of many origins' rules).
    std::size_t bytes() const;

private:
    struct slice {  ///< a part of patterns_ or agent_names_
        std::uint32_t offset = 0;
        std::uint32_t size = 0;
    };
    struct rule {
        slice pattern;  ///< normalised, in patterns_
        bool allow = false;
    };
    struct group {
        std::uint32_t rules_begin = 0;  ///< its rules are rules_[rules_begin, rules_end)
        std::uint32_t rules_end = 0;
        double longest_delay = 0;  ///< 0: none asked
    };
    struct agent {
        slice name;  ///< lower-cased, in agent_names_; "*" for the default groups
        std::uint32_t group = 0;
    };

    void open_group();
    void add_agent(std::string_view token);
    bool group_can_apply() const;
    void add_rule(bool allow, std::string_view value);
    void add_delay(std::string_view value);
    void finish();
    std::string_view pattern_of(const rule& r) const { return view(patterns_, r.pattern); }
    std::string_view name_of(const agent& a) const { return view(agent_names_, a.name); }
    static std::string_view view(const std::string& s, slice part) { return {s.data() + part.offset, part.size}; }
    std::vector<std::uint32_t> applicable_groups(std::string_view user_agent) const;

    std::string patterns_;       ///< every rule's normalised pattern, back to back
    std::string agent_names_;    ///< every group's agent tokens, back to back
    std::vector<rule> rules_;    ///< group by group, in file order
    std::vector<group> groups_;  ///< in file order
    std::vector<agent> agents_;  ///< sorted by name, then group: a User-Agent's words are looked up here
};

}  // namespace politeproxy
