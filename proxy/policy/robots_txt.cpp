#include "politeproxy/policy/robots_txt.hpp"

#include <algorithm>
#include <charconv>

namespace politeproxy {

namespace {

char lower(char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c; }

bool iequals(std::string_view a, std::string_view b) {
    return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
               return lower(x) == lower(y);
           });
}

bool word_char(char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '_';
}

// Whether `word` is one of the words (runs of letters, digits, '-' and '_') of `text`,
// case-insensitively. Linear in `text`: a hostile file's many User-agent lines each cost
// one pass over the client's (bounded) User-Agent.
bool has_word(std::string_view text, std::string_view word) {
    std::size_t i = 0;
    while (i < text.size()) {
        while (i < text.size() && !word_char(text[i])) ++i;
        const std::size_t start = i;
        while (i < text.size() && word_char(text[i])) ++i;
        if (i > start && iequals(text.substr(start, i - start), word)) return true;
    }
    return false;
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

// How well a group's agent token fits the client: the token's length when it is a word
// of the client's User-Agent, else 0. `*` scores 0 and is handled apart: a named group that
// fits always beats it.
std::size_t match_length(std::string_view token, std::string_view user_agent) {
    if (token.empty() || token == "*") return 0;
    return has_word(user_agent, token) ? token.size() : 0;
}

// Reads the file line by line, telling `visit` each User-agent token (and whether it
// starts a new group) and each Crawl-delay value of a group.
template <class Visit>
void scan(std::string_view text, Visit&& visit) {
    bool in_agents = false;  // the lines just read were User-agent lines
    while (!text.empty()) {
        const auto eol = text.find_first_of("\r\n");
        std::string_view line = text.substr(0, eol);
        text.remove_prefix(eol == std::string_view::npos ? text.size() : eol + 1);
        if (const auto hash = line.find('#'); hash != std::string_view::npos) line = line.substr(0, hash);
        const auto colon = line.find(':');
        if (colon == std::string_view::npos) continue;
        const std::string_view key = trim(line.substr(0, colon));
        const std::string_view value = trim(line.substr(colon + 1));
        if (iequals(key, "user-agent")) {
            visit.agent(agent_token(value), !in_agents);
            in_agents = true;
        } else if (iequals(key, "sitemap")) {
            continue;  // not part of any group
        } else {
            in_agents = false;
            if (iequals(key, "crawl-delay")) visit.delay(seconds(value));
        }
    }
}

}  // namespace

std::optional<double> crawl_delay_for(std::string_view robots_txt, std::string_view user_agent) {
    robots_txt = robots_txt.substr(0, robots_txt_max_bytes);
    // First pass: the best match among the named groups, and whether `*` has a group.
    struct best_match {
        std::string_view user_agent;
        std::size_t best = 0;
        bool star = false;
        void agent(std::string_view token, bool) {
            best = std::max(best, match_length(token, user_agent));
            star = star || token == "*";
        }
        void delay(std::optional<double>) {}
    } first{user_agent};
    scan(robots_txt, first);
    if (first.best == 0 && !first.star) return std::nullopt;

    // Second pass: the delays of every group that applies (a group applies when one of
    // its agents is the best match: merged groups).
    struct delays {
        std::string_view user_agent;
        std::size_t best;
        bool applies = false;
        std::optional<double> longest;
        void agent(std::string_view token, bool starts_group) {
            if (starts_group) applies = false;
            applies = applies || (best == 0 ? token == "*" : match_length(token, user_agent) == best);
        }
        void delay(std::optional<double> d) {
            if (applies && d) longest = std::max(longest.value_or(0.0), *d);
        }
    } second{user_agent, first.best};
    scan(robots_txt, second);
    if (second.longest && *second.longest <= 0) return std::nullopt;
    return second.longest;
}

}  // namespace politeproxy
