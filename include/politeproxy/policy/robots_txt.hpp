#pragma once
#include <cstddef>
#include <optional>
#include <string_view>

namespace politeproxy {

/// The most of a robots.txt that is read: RFC 9309 asks crawlers to parse at least 500 KiB.
inline constexpr std::size_t robots_txt_max_bytes = 500 * 1024;

/// The Crawl-delay (seconds) a robots.txt asks of a client with `user_agent`, if any.
///
/// Groups as RFC 9309 forms them: one or more `User-agent` lines, then rules; a
/// `User-agent` line after a rule starts a new group; groups naming the same agent are
/// merged; lines before the first group, comments and unknown keys are ignored; keys are
/// case-insensitive. A group applies when its agent token (up to the first `/` or space)
/// is, case-insensitively, a word of the client's User-Agent ("MyBot" in "Mozilla/5.0
/// (compatible; MyBot/2.1)"; RFC 9309 matches the product token; the longest such token
/// wins); otherwise the `*` group applies. Crawl-delay
/// is a decimal number of seconds (a non-standard line Bing, Yandex and Scrapy honour);
/// an unreadable one is ignored, several in the applicable groups give the longest.
/// A matching group without a Crawl-delay means none, even if `*` has one.
///
/// Only the first robots_txt_max_bytes are read (the fetch refuses a longer file). Time is
/// linear in the file times the User-Agent's length: keep the User-Agent short (the fetch
/// passes at most 512 bytes). Sans-io; no allocation.
std::optional<double> crawl_delay_for(std::string_view robots_txt, std::string_view user_agent);

}  // namespace politeproxy
