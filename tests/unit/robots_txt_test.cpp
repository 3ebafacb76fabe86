#include "politeproxy/policy/robots_txt.hpp"

#include <doctest/doctest.h>

#include <string>

using namespace politeproxy;

namespace {
const std::string chrome = "Mozilla/5.0 (X11; Linux x86_64) Chrome/120.0";
const std::string mybot = "Mozilla/5.0 (compatible; MyBot/2.1; +https://example.com/bot)";

std::optional<double> delay(std::string_view text, std::string_view user_agent) {
    return robots_rules::parse(text).crawl_delay(user_agent);
}

bool allowed(std::string_view text, std::string_view path, std::string_view user_agent = chrome) {
    return robots_rules::parse(text).allowed(path, user_agent);
}
}  // namespace

TEST_CASE("robots.txt: the * group's Crawl-delay, for any client") {
    CHECK(delay("User-agent: *\nDisallow: /private\nCrawl-delay: 5\n", chrome) == 5.0);
    CHECK(delay("user-AGENT: *\r\ncrawl-DELAY:2.5\r\n", chrome) == 2.5);
    CHECK(delay("User-agent: *\nCrawl-delay: 0.25 # a comment\n", chrome) == 0.25);
    CHECK_FALSE(delay("User-agent: *\nDisallow: /\n", chrome));
    CHECK_FALSE(delay("", chrome));
    CHECK_FALSE(delay("<html>not a robots.txt</html>", chrome));
}

TEST_CASE("robots.txt: a group naming the client wins over *, the longest name wins") {
    const std::string text =
        "User-agent: *\nCrawl-delay: 10\n\n"
        "User-agent: bot\nCrawl-delay: 7\n\n"
        "User-agent: MyBot/2.1\nCrawl-delay: 3\n";
    CHECK(delay(text, mybot + " bot") == 3.0);  // "mybot" beats "bot"
    CHECK(delay(text, "bot/1.0 (+https://example.com)") == 7.0);
    CHECK(delay(text, "OtherBot/1") == 10.0);  // a word, not a substring: "bot" is not OtherBot's
    CHECK(delay(text, chrome) == 10.0);        // no named group fits
    // A named group without a Crawl-delay means none, whatever * says.
    CHECK_FALSE(delay("User-agent: *\nCrawl-delay: 10\nUser-agent: mybot\nDisallow: /x\n", mybot));
}

TEST_CASE("robots.txt: groups are formed as RFC 9309 says") {
    // Several User-agent lines open one group; a User-agent after a rule opens the next.
    const std::string text =
        "Crawl-delay: 99\n"  // before any group: ignored
        "User-agent: alpha\nUser-agent: mybot\nCrawl-delay: 4\n"
        "User-agent: gamma\nCrawl-delay: 8\n"
        "Sitemap: https://example.com/sitemap.xml\n"
        "Crawl-delay: 9\n";  // still gamma's: a Sitemap line belongs to no group
    CHECK(delay(text, mybot) == 4.0);
    CHECK(delay(text, "gamma/1") == 9.0);  // the longest of a group's delays
    CHECK_FALSE(delay(text, chrome));       // no group for it, no *
    // Groups naming the same agent are merged.
    CHECK(delay("User-agent: mybot\nCrawl-delay: 1\nUser-agent: x\nDisallow:\nUser-agent: MYBOT\nCrawl-delay: 6\n", mybot) ==
          6.0);
    // Rules before any group are ignored too.
    CHECK(allowed("Disallow: /\nUser-agent: *\nAllow: /x\n", "/"));
}

TEST_CASE("robots.txt: unreadable delays are ignored, nothing beyond 500 KiB is read") {
    CHECK_FALSE(delay("User-agent: *\nCrawl-delay: soon\n", chrome));
    CHECK_FALSE(delay("User-agent: *\nCrawl-delay: -3\n", chrome));
    CHECK_FALSE(delay("User-agent: *\nCrawl-delay: 1e9\n", chrome));
    CHECK_FALSE(delay("User-agent: *\nCrawl-delay: 0\n", chrome));
    CHECK_FALSE(delay("User-agent: *\nCrawl-delay: 5s\n", chrome));
    CHECK(delay("User-agent: *\nCrawl-delay: 5\nCrawl-delay: bad\n", chrome) == 5.0);
    const std::string padding(robots_txt_max_bytes, '#');
    CHECK_FALSE(delay("User-agent: *\n" + padding + "\nCrawl-delay: 5\n", chrome));
    CHECK(delay("User-agent: *\nCrawl-delay: 5\n" + padding, chrome) == 5.0);
    CHECK(allowed("User-agent: *\n" + padding + "\nDisallow: /\n", "/"));
}

TEST_CASE("robots.txt: no file allows everything; disallow_all() nothing but /robots.txt") {
    const robots_rules none;
    CHECK(none.allowed("/", chrome));
    CHECK(none.allowed("/private?x=1", mybot));
    CHECK_FALSE(none.crawl_delay(chrome));

    const auto all = robots_rules::disallow_all();
    for (const auto* ua : {chrome.c_str(), mybot.c_str(), ""}) {
        CHECK_FALSE(all.allowed("/", ua));
        CHECK_FALSE(all.allowed("", ua));
        CHECK_FALSE(all.allowed("/a/b?c=d", ua));
        CHECK_FALSE(all.allowed("not-a-path", ua));
        CHECK(all.allowed("/robots.txt", ua));
        CHECK_FALSE(all.crawl_delay(ua));
    }
    CHECK(all.bytes() >= sizeof(robots_rules));
}

TEST_CASE("robots.txt: the simple example of RFC 9309 section 5.1") {
    const std::string text =
        "User-Agent: *\n"
        "Disallow: *.gif$\n"
        "Disallow: /example/\n"
        "Allow: /publications/\n"
        "\n"
        "User-Agent: foobot\n"
        "Disallow:/\n"
        "Allow:/example/page.html\n"
        "Allow:/example/allowed.gif\n"
        "\n"
        "User-Agent: barbot\n"
        "User-Agent: bazbot\n"
        "Disallow: /example/page.html\n"
        "\n"
        "User-Agent: quxbot\n"
        "\n"
        "EOF\n";
    const auto rules = robots_rules::parse(text);
    // Any other crawler: no .gif anywhere, nothing under /example/.
    CHECK_FALSE(rules.allowed("/images/a.gif", chrome));
    CHECK(rules.allowed("/images/a.gif?x", chrome));  // `$`: the path must end there
    CHECK_FALSE(rules.allowed("/example/", chrome));
    CHECK(rules.allowed("/publications/2024", chrome));
    CHECK(rules.allowed("/", chrome));
    // foobot, a regular case (its rules without the optional space): only two paths.
    CHECK(rules.allowed("/example/page.html", "FooBot/1.0"));
    CHECK(rules.allowed("/example/allowed.gif", "FooBot/1.0"));
    CHECK_FALSE(rules.allowed("/", "FooBot/1.0"));
    CHECK_FALSE(rules.allowed("/publications/", "FooBot/1.0"));
    // barbot and bazbot, one group for two agents: all but /example/page.html.
    for (const auto* ua : {"barbot", "Mozilla/5.0 (compatible; bazbot/3)"}) {
        CHECK_FALSE(rules.allowed("/example/page.html", ua));
        CHECK(rules.allowed("/example/other.html", ua));
        CHECK(rules.allowed("/a.gif", ua));
    }
    // quxbot, an empty group at the end of the file: everything.
    CHECK(rules.allowed("/example/page.html", "quxbot"));
    CHECK(rules.allowed("/a.gif", "quxbot"));
}

TEST_CASE("robots.txt: the most specific rule wins; Allow wins a tie") {
    // RFC 9309 5.2.
    const std::string text = "User-agent: *\nAllow: /example/page/\nDisallow: /example/page/disallowed.gif\n";
    CHECK(allowed(text, "/example/page/"));
    CHECK(allowed(text, "/example/page/a.gif"));
    CHECK_FALSE(allowed(text, "/example/page/disallowed.gif"));
    CHECK(allowed(text, "/other"));  // no rule matches
    CHECK(allowed("User-agent: *\nAllow: /p\nDisallow: /\n", "/page"));
    CHECK_FALSE(allowed("User-agent: *\nDisallow: /p\nAllow: /\n", "/page"));
    CHECK(allowed("User-agent: *\nDisallow: /a\nAllow: /a\n", "/a"));
    CHECK(allowed("User-agent: *\nAllow: /a$\nDisallow: /a*\n", "/a"));
    // Length counts the pattern's octets, wildcards too.
    CHECK_FALSE(allowed("User-agent: *\nAllow: /page\nDisallow: /*.html\n", "/page.html"));
    // Patterns are case-sensitive; so are paths.
    CHECK(allowed("User-agent: *\nDisallow: /X\n", "/x"));
}

TEST_CASE("robots.txt: * matches any run, a final $ the end of the path") {
    const std::string php = "User-agent: *\nDisallow: /*.php$\n";
    CHECK_FALSE(allowed(php, "/index.php"));
    CHECK_FALSE(allowed(php, "/a/b.php"));
    CHECK(allowed(php, "/index.php?x=1"));
    CHECK(allowed(php, "/index.php5"));
    CHECK(allowed(php, "/"));

    const std::string root_only = "User-agent: *\nDisallow: /\nAllow: /$\n";
    CHECK(allowed(root_only, "/"));
    CHECK(allowed(root_only, ""));  // empty means "/"
    CHECK_FALSE(allowed(root_only, "/a"));
    CHECK_FALSE(allowed(root_only, "/?x=1"));

    const std::string query = "User-agent: *\nDisallow: /*?\n";
    CHECK_FALSE(allowed(query, "/a?b=c"));
    CHECK_FALSE(allowed(query, "/?"));
    CHECK(allowed(query, "/a/b"));

    CHECK_FALSE(allowed("User-agent: *\nDisallow: /a*b*c\n", "/axxbyyczz"));
    CHECK(allowed("User-agent: *\nDisallow: /a*b*c\n", "/axxcyyb"));
    CHECK_FALSE(allowed("User-agent: *\nDisallow: /a**b$\n", "/ab"));
    CHECK(allowed("User-agent: *\nDisallow: /a*a$\n", "/a"));  // pieces may not overlap
    // A `$` elsewhere is an octet like any other.
    CHECK_FALSE(allowed("User-agent: *\nDisallow: /a$b\n", "/a$bc"));
    CHECK(allowed("User-agent: *\nDisallow: /a$b\n", "/a"));
}

TEST_CASE("robots.txt: percent-encoding as RFC 9309 2.2.2's table") {
    const auto matches = [](std::string pattern, std::string_view path) {
        return !allowed("User-agent: *\nDisallow: " + pattern + "\n", path);
    };
    CHECK(matches("/foo/bar?baz=quz", "/foo/bar?baz=quz"));
    CHECK(matches("/foo/bar/ツ", "/foo/bar/%E3%83%84"));
    CHECK(matches("/foo/bar/ツ", "/foo/bar/%e3%83%84"));
    CHECK(matches("/foo/bar/%E3%83%84", "/foo/bar/%E3%83%84"));
    CHECK(matches("/foo/bar/%e3%83%84", "/foo/bar/ツ"));  // a path with raw octets is encoded too
    CHECK(matches("/foo/bar/%62%61%7A", "/foo/bar/%62%61%7A"));
    CHECK(matches("/foo/bar/%62%61%7A", "/foo/bar/baz"));  // unreserved characters' escapes are the characters
    CHECK(matches("/foo/bar/baz", "/foo/bar/%62%61%7a"));
    CHECK_FALSE(matches("/a%2Fb", "/a/b"));  // a reserved character's escape stays escaped
    CHECK(matches("/a%2fb", "/a%2Fb"));
    CHECK(matches("/a b", "/a%20b"));
    CHECK(matches("/100%", "/100%"));  // a lone % is an octet
}

TEST_CASE("robots.txt: which rules count") {
    CHECK(allowed("User-agent: *\nDisallow:\n", "/"));  // an empty value matches nothing
    CHECK_FALSE(allowed("User-agent: *\nDisallow:\nDisallow: /a\n", "/a"));
    CHECK(allowed("User-agent: *\nDisallow: a\n", "a"));  // neither '/' nor '*' first: ignored
    CHECK_FALSE(allowed("USER-agent: FooBot\ndisALLOW: /x\n", "/x", "Mozilla/5.0 (compatible; foobot/1)"));
    CHECK_FALSE(allowed("\xEF\xBB\xBFUser-agent: *\nDisallow: /\n", "/"));  // a byte order mark is skipped
    CHECK(allowed("User-agent: *\r\nDisallow: /a\r\nSitemap: https://example.com/s.xml\r\nAllow: /a\r\n", "/a"));
    // /robots.txt is always allowed (that very path, not its neighbours).
    const std::string all = "User-agent: *\nDisallow: /\n";
    CHECK(allowed(all, "/robots.txt"));
    CHECK_FALSE(allowed(all, "/robots.txt?x=1"));
    CHECK_FALSE(allowed(all, "/robots.txtx"));
}

TEST_CASE("robots.txt: named groups beat *, the longest name wins, groups merge") {
    const std::string text =
        "User-agent: *\nDisallow: /\n"
        "User-agent: bot\nDisallow: /b\n"
        "User-agent: mybot\nDisallow: /m\n"
        "User-agent: emptybot\n"
        "User-agent: other\nDisallow: /o\n"
        "User-agent: MYBOT\nDisallow: /n\n";
    CHECK_FALSE(allowed(text, "/", chrome));
    CHECK(allowed(text, "/", "bot/1"));
    CHECK_FALSE(allowed(text, "/b", "bot/1"));
    // "mybot" beats "bot"; both of its groups apply, not "other"'s.
    CHECK(allowed(text, "/b", mybot + " bot"));
    CHECK_FALSE(allowed(text, "/m", mybot + " bot"));
    CHECK_FALSE(allowed(text, "/n", mybot));
    CHECK(allowed(text, "/o", mybot));
    // A matching group with no rules allows everything, whatever * says.
    CHECK(allowed(text, "/", "EmptyBot/0.1"));
    // Two names of the same length, both in the User-Agent: both groups apply.
    const std::string two = "User-agent: alpha\nDisallow: /a\nUser-agent: gamma\nDisallow: /g\n";
    CHECK_FALSE(allowed(two, "/a", "alpha gamma"));
    CHECK_FALSE(allowed(two, "/g", "alpha gamma"));
    CHECK(allowed(two, "/a", "gamma"));
}

TEST_CASE("robots.txt: a hostile file gives its answer without blowing up") {
    std::string stars = "User-agent: *\n";
    for (int i = 0; i < 20000; ++i) stars += "Disallow: /*a*a*a*a*b\n";
    const auto rules = robots_rules::parse(stars);
    CHECK(rules.bytes() > 20000 * std::string_view("/*a*a*a*a*b").size());
    const std::string path = "/" + std::string(16 * 1024, 'a');
    CHECK(rules.allowed(path, chrome));
    CHECK_FALSE(rules.allowed(path + "b", chrome));
    CHECK(allowed("User-agent: *\nDisallow: /" + std::string(10000, '*') + "b$\n", path));

    // Tens of thousands of groups, all for one agent, and a User-Agent of 512 bytes of it.
    std::string agents;
    for (int i = 0; i < 20000; ++i) agents += "User-agent: a\nDisallow: /a\n";
    std::string user_agent;
    while (user_agent.size() < 600) user_agent += "a ";
    const auto many = robots_rules::parse(agents);
    CHECK_FALSE(many.allowed("/a", user_agent));
    CHECK(many.allowed("/b", user_agent));

    // As many distinct agents, each its own group.
    std::string named;
    for (int i = 0; i < 20000; ++i) named += "User-agent: bot" + std::to_string(i) + "\nDisallow: /" + std::to_string(i) + "\n";
    const auto distinct = robots_rules::parse(named);
    CHECK_FALSE(distinct.allowed("/123", "bot123/1.0"));
    CHECK(distinct.allowed("/5", "bot123/1.0"));
    CHECK(distinct.allowed("/123", "bot1234/1.0"));
}
