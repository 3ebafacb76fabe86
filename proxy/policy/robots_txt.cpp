#include "politeproxy/policy/robots_txt.hpp"

#include <algorithm>
#include <charconv>

namespace politeproxy {

namespace {

// The words of a longer User-Agent are not looked at: a bound on each call's work.
constexpr std::size_t user_agent_max_bytes = 512;

constexpr std::string_view utf8_byte_order_mark = "\xEF\xBB\xBF";

char lower(char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c; }

char upper(char c) { return c >= 'a' && c <= 'z' ? static_cast<char>(c - 'a' + 'A') : c; }

bool iequals(std::string_view a, std::string_view b) {
    return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
               return lower(x) == lower(y);
           });
}

bool word_char(char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '_';
}

bool hex_digit(char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F'); }
int hex_value(char c) { return c <= '9' ? c - '0' : (c | 0x20) - 'a' + 10; }
bool unreserved(char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '.' ||
           c == '_' || c == '~';
}

// Calls `visit` with each word (run of letters, digits, '-' and '_') of `text`.
template <class Visit>
void for_each_word(std::string_view text, Visit&& visit) {
    std::size_t i = 0;
    while (i < text.size()) {
        while (i < text.size() && !word_char(text[i])) ++i;
        const std::size_t start = i;
        while (i < text.size() && word_char(text[i])) ++i;
        if (i > start) visit(text.substr(start, i - start));
    }
}

std::string_view trim(std::string_view s) {
    while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
    while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
    return s;
}

// The agent token of a User-agent line: up to the first '/' or space.
std::string_view agent_token(std::string_view value) {
    return value.substr(0, std::min(value.find('/'), value.find_first_of(" \t")));
}

// A delay in seconds: digits, optionally a fraction. Anything else is unreadable.
std::optional<double> seconds(std::string_view v) {
    if (v.empty() || v.size() > 32 || !(v.front() >= '0' && v.front() <= '9')) return std::nullopt;
    double out = 0;
    const auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), out, std::chars_format::fixed);
    if (ec != std::errc() || end != v.data() + v.size()) return std::nullopt;
    return out;
}

struct key_value {
    std::string_view key;
    std::string_view value;
};

// The next `key: value` line of `text`, which is consumed up to it, without its comment.
// Lines without a colon are skipped; nullopt at the end.
std::optional<key_value> next_line(std::string_view& text) {
    while (!text.empty()) {
        const auto eol = text.find_first_of("\r\n");
        std::string_view line = text.substr(0, eol);
        text.remove_prefix(eol == std::string_view::npos ? text.size() : eol + 1);
        line = line.substr(0, line.find('#'));
        const auto colon = line.find(':');
        if (colon == std::string_view::npos) continue;
        return key_value{trim(line.substr(0, colon)), trim(line.substr(colon + 1))};
    }
    return std::nullopt;
}

// RFC 9309 2.2.2: octets outside ASCII are compared percent-encoded, so "/ツ" in the file
// is the "/%E3%83%84" a client sends; so are controls and space, which cannot be sent
// as they are. An escape's hex digits are compared whatever their case, and the escape
// of an unreserved character (RFC 3986 2.3: letters, digits, "-", ".", "_", "~") is that
// character (RFC 3986 6.2.2.2; RFC 9309's table: "/foo/bar/%62%61%7A" is matched as
// "/foo/bar/baz"). Other escapes stay escaped: "%2F" is not "/".
void append_normalised(std::string& out, std::string_view in) {
    static constexpr char hex[] = "0123456789ABCDEF";
    for (std::size_t i = 0; i < in.size(); ++i) {
        const auto octet = static_cast<unsigned char>(in[i]);
        if (octet == '%' && i + 2 < in.size() && hex_digit(in[i + 1]) && hex_digit(in[i + 2])) {
            const char decoded = static_cast<char>(hex_value(in[i + 1]) * 16 + hex_value(in[i + 2]));
            if (unreserved(decoded)) {
                out += decoded;
            } else {
                out += '%';
                out += upper(in[i + 1]);
                out += upper(in[i + 2]);
            }
            i += 2;
        } else if (octet <= 0x20 || octet >= 0x7f) {
            out += '%';
            out += hex[octet >> 4];
            out += hex[octet & 0xf];
        } else {
            out += in[i];
        }
    }
}

// Whether `pattern` matches `path` from its start: `*` stands for any run of octets, a
// final `$` for the end of the path. The pattern is pieces separated by `*`; the first
// must start the path, the last (with `$`) must end it, and the others are found left to
// right, each at its leftmost place after the one before: a later place would only leave
// less room for the rest, so the search never goes back.
bool pattern_matches(std::string_view pattern, std::string_view path) {
    const bool anchored = pattern.ends_with('$');
    if (anchored) pattern.remove_suffix(1);
    const auto first_star = pattern.find('*');
    const std::string_view head = pattern.substr(0, first_star);
    if (!path.starts_with(head)) return false;
    if (first_star == std::string_view::npos) return !anchored || path.size() == head.size();

    std::string_view pieces = pattern.substr(first_star + 1);  // what follows the first `*`
    std::string_view rest = path.substr(head.size());          // where they are to be found
    if (anchored) {
        const auto last_star = pieces.rfind('*');
        const std::string_view tail = last_star == std::string_view::npos ? pieces : pieces.substr(last_star + 1);
        if (!rest.ends_with(tail)) return false;
        rest.remove_suffix(tail.size());
        pieces = last_star == std::string_view::npos ? std::string_view{} : pieces.substr(0, last_star);
    }
    while (!pieces.empty()) {
        const auto star = pieces.find('*');
        const std::string_view piece = pieces.substr(0, star);
        const auto at = rest.find(piece);
        if (at == std::string_view::npos) return false;
        rest.remove_prefix(at + piece.size());
        pieces.remove_prefix(star == std::string_view::npos ? pieces.size() : star + 1);
    }
    return true;
}

std::uint32_t to_u32(std::size_t n) { return static_cast<std::uint32_t>(n); }  // sizes within 3 x 500 KiB

}  // namespace

robots_rules robots_rules::parse(std::string_view text) {
    text = text.substr(0, robots_txt_max_bytes);
    if (text.starts_with(utf8_byte_order_mark)) text.remove_prefix(utf8_byte_order_mark.size());
    robots_rules out;
    bool in_agents = false;  // the lines just read were User-agent lines: another one joins their group
    while (const auto line = next_line(text)) {
        if (iequals(line->key, "user-agent")) {
            if (!in_agents) out.open_group();
            out.add_agent(agent_token(line->value));
            in_agents = true;
        } else if (iequals(line->key, "sitemap")) {
            continue;  // not part of any group
        } else {
            in_agents = false;
            if (iequals(line->key, "allow")) out.add_rule(true, line->value);
            else if (iequals(line->key, "disallow")) out.add_rule(false, line->value);
            else if (iequals(line->key, "crawl-delay")) out.add_delay(line->value);
        }
    }
    out.finish();
    return out;
}

robots_rules robots_rules::disallow_all() {
    // `*` rather than `/`: also a path that does not start with '/'.
    return parse("User-agent: *\nDisallow: *\n");
}

void robots_rules::open_group() { groups_.push_back({to_u32(rules_.size()), to_u32(rules_.size()), 0}); }

void robots_rules::add_agent(std::string_view token) {
    // A token with other characters than a word's is never a word of a User-Agent.
    if (token != "*" && (token.empty() || !std::all_of(token.begin(), token.end(), word_char))) return;
    agents_.push_back({{to_u32(agent_names_.size()), to_u32(token.size())}, to_u32(groups_.size() - 1)});
    for (char c : token) agent_names_ += lower(c);
}

// Whether the group being read names an agent some client can match: the rules of one
// that does not (or of no group, before the first User-agent) need not be kept.
bool robots_rules::group_can_apply() const {
    return !agents_.empty() && agents_.back().group + 1 == groups_.size();
}

void robots_rules::add_rule(bool allow, std::string_view value) {
    if (!group_can_apply()) return;
    // An empty value matches nothing (RFC 9309 2.2.2); one not starting with '/' or '*'
    // names no path.
    if (value.empty() || (value.front() != '/' && value.front() != '*')) return;
    const std::size_t offset = patterns_.size();
    append_normalised(patterns_, value);
    rules_.push_back({{to_u32(offset), to_u32(patterns_.size() - offset)}, allow});
    groups_.back().rules_end = to_u32(rules_.size());
}

void robots_rules::add_delay(std::string_view value) {
    if (!group_can_apply()) return;
    if (const auto delay = seconds(value)) groups_.back().longest_delay = std::max(groups_.back().longest_delay, *delay);
}

void robots_rules::finish() {
    // Stable: within one name, groups stay in file order.
    std::stable_sort(agents_.begin(), agents_.end(),
                     [this](const agent& a, const agent& b) { return name_of(a) < name_of(b); });
    patterns_.shrink_to_fit();
    agent_names_.shrink_to_fit();
    rules_.shrink_to_fit();
    groups_.shrink_to_fit();
    agents_.shrink_to_fit();
}

// The groups (indices in groups_, ascending, each once) that apply to `user_agent`.
std::vector<std::uint32_t> robots_rules::applicable_groups(std::string_view user_agent) const {
    // The entries of agents_ named `name`, a run in it. (No std::ranges here: the fuzz
    // build's clang 14 cannot compile libstdc++ 12's.)
    const auto named = [this](std::string_view name) {
        const auto first = std::lower_bound(agents_.begin(), agents_.end(), name,
                                            [this](const agent& a, std::string_view n) { return name_of(a) < n; });
        const auto last = std::upper_bound(first, agents_.end(), name,
                                           [this](std::string_view n, const agent& a) { return n < name_of(a); });
        return std::pair(first, last);
    };
    // The agent names that are words of the User-Agent, of the longest length found; each
    // as the index of its first entry in agents_ (a word may occur twice in a User-Agent).
    std::vector<std::size_t> best_names;
    std::size_t best_length = 0;
    std::string word;
    for_each_word(user_agent.substr(0, user_agent_max_bytes), [&](std::string_view w) {
        if (w.size() < best_length) return;
        word.clear();
        for (char c : w) word += lower(c);
        const auto [first, last] = named(word);
        if (first == last) return;
        if (w.size() > best_length) best_names.clear();
        best_length = w.size();
        best_names.push_back(static_cast<std::size_t>(first - agents_.begin()));
    });
    std::sort(best_names.begin(), best_names.end());
    best_names.erase(std::unique(best_names.begin(), best_names.end()), best_names.end());

    std::vector<std::uint32_t> out;
    const auto add = [&](std::string_view name) {
        const auto [first, last] = named(name);
        for (auto a = first; a != last; ++a) out.push_back(a->group);
    };
    if (best_names.empty()) add("*");
    for (const std::size_t first : best_names) add(name_of(agents_[first]));
    // A group naming several of the words (or one word twice) is one group.
    std::sort(out.begin(), out.end());
    out.erase(std::unique(out.begin(), out.end()), out.end());
    return out;
}

bool robots_rules::allowed(std::string_view path, std::string_view user_agent) const {
    if (path == "/robots.txt" || rules_.empty()) return true;  // RFC 9309 2.2.2: /robots.txt is implicitly allowed
    const auto groups = applicable_groups(user_agent);
    if (groups.empty()) return true;
    std::string target;
    append_normalised(target, path.empty() ? std::string_view("/") : path);

    std::size_t best_length = 0;  // of the most specific rule that matched so far
    bool allow = true;            // what it says; no match allows
    for (const std::uint32_t g : groups) {
        for (std::uint32_t i = groups_[g].rules_begin; i < groups_[g].rules_end; ++i) {
            const std::string_view pattern = pattern_of(rules_[i]);
            // Only a longer pattern, or an Allow as long as the Disallow that matched, can
            // change the answer: the others need not be tried.
            const bool could_win =
                pattern.size() > best_length || (pattern.size() == best_length && rules_[i].allow && !allow);
            if (could_win && pattern_matches(pattern, target)) {
                best_length = pattern.size();
                allow = rules_[i].allow;
            }
        }
    }
    return allow;
}

std::optional<double> robots_rules::crawl_delay(std::string_view user_agent) const {
    double longest = 0;
    for (const std::uint32_t g : applicable_groups(user_agent)) longest = std::max(longest, groups_[g].longest_delay);
    if (longest > 0) return longest;
    return std::nullopt;
}

std::size_t robots_rules::bytes() const {
    return sizeof(*this) + patterns_.capacity() + agent_names_.capacity() + rules_.capacity() * sizeof(rule) +
           groups_.capacity() * sizeof(group) + agents_.capacity() * sizeof(agent);
}

}  // namespace politeproxy
