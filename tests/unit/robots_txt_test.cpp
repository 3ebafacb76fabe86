#include "politeproxy/policy/robots_txt.hpp"

#include <doctest/doctest.h>

#include <string>

using namespace politeproxy;

namespace {
const std::string chrome = "Mozilla/5.0 (X11; Linux x86_64) Chrome/120.0";
const std::string mybot = "Mozilla/5.0 (compatible; MyBot/2.1; +https://example.com/bot)";
}  // namespace

TEST_CASE("robots.txt: the * group's Crawl-delay, for any client") {
    CHECK(crawl_delay_for("User-agent: *\nDisallow: /private\nCrawl-delay: 5\n", chrome) == 5.0);
    CHECK(crawl_delay_for("user-AGENT: *\r\ncrawl-DELAY:2.5\r\n", chrome) == 2.5);
    CHECK(crawl_delay_for("User-agent: *\nCrawl-delay: 0.25 # a comment\n", chrome) == 0.25);
    CHECK_FALSE(crawl_delay_for("User-agent: *\nDisallow: /\n", chrome));
    CHECK_FALSE(crawl_delay_for("", chrome));
    CHECK_FALSE(crawl_delay_for("<html>not a robots.txt</html>", chrome));
}

TEST_CASE("robots.txt: a group naming the client wins over *, the longest name wins") {
    const std::string text =
        "User-agent: *\nCrawl-delay: 10\n\n"
        "User-agent: bot\nCrawl-delay: 7\n\n"
        "User-agent: MyBot/2.1\nCrawl-delay: 3\n";
    CHECK(crawl_delay_for(text, mybot + " bot") == 3.0);  // "mybot" beats "bot"
    CHECK(crawl_delay_for(text, "bot/1.0 (+https://example.com)") == 7.0);
    CHECK(crawl_delay_for(text, "OtherBot/1") == 10.0);  // a word, not a substring: "bot" is not OtherBot's
    CHECK(crawl_delay_for(text, chrome) == 10.0);  // no named group fits
    // A named group without a Crawl-delay means none, whatever * says.
    CHECK_FALSE(crawl_delay_for("User-agent: *\nCrawl-delay: 10\nUser-agent: mybot\nDisallow: /x\n", mybot));
}

TEST_CASE("robots.txt: groups are formed as RFC 9309 says") {
    // Several User-agent lines open one group; a User-agent after a rule opens the next.
    const std::string text =
        "Crawl-delay: 99\n"  // before any group: ignored
        "User-agent: alpha\nUser-agent: mybot\nCrawl-delay: 4\n"
        "User-agent: gamma\nCrawl-delay: 8\n"
        "Sitemap: https://example.com/sitemap.xml\n"
        "Crawl-delay: 9\n";  // still gamma's: a Sitemap line belongs to no group
    CHECK(crawl_delay_for(text, mybot) == 4.0);
    CHECK(crawl_delay_for(text, "gamma/1") == 9.0);  // the longest of a group's delays
    CHECK_FALSE(crawl_delay_for(text, chrome));       // no group for it, no *
    // Groups naming the same agent are merged.
    CHECK(crawl_delay_for("User-agent: mybot\nCrawl-delay: 1\nUser-agent: x\nDisallow:\nUser-agent: MYBOT\nCrawl-delay: 6\n",
                          mybot) == 6.0);
}

TEST_CASE("robots.txt: unreadable delays are ignored, nothing beyond 500 KiB is read") {
    CHECK_FALSE(crawl_delay_for("User-agent: *\nCrawl-delay: soon\n", chrome));
    CHECK_FALSE(crawl_delay_for("User-agent: *\nCrawl-delay: -3\n", chrome));
    CHECK_FALSE(crawl_delay_for("User-agent: *\nCrawl-delay: 1e9\n", chrome));
    CHECK_FALSE(crawl_delay_for("User-agent: *\nCrawl-delay: 0\n", chrome));
    CHECK_FALSE(crawl_delay_for("User-agent: *\nCrawl-delay: 5s\n", chrome));
    CHECK(crawl_delay_for("User-agent: *\nCrawl-delay: 5\nCrawl-delay: bad\n", chrome) == 5.0);
    std::string big = "User-agent: *\n" + std::string(robots_txt_max_bytes, '#') + "\nCrawl-delay: 5\n";
    CHECK_FALSE(crawl_delay_for(big, chrome));
    CHECK(crawl_delay_for("User-agent: *\nCrawl-delay: 5\n" + std::string(robots_txt_max_bytes, '#'), chrome) == 5.0);
}
