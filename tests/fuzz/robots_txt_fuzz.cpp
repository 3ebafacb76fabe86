// robots.txt: any bytes give an answer, never a crash: a delay positive and finite or none,
// /robots.txt always allowed, the same answer twice, and disallow_all() refusing any other path.
// The first line of the input is the client's User-Agent, the second the path asked, the
// rest the file.
#include "fuzz_input.hpp"

#include "politeproxy/policy/robots_txt.hpp"

#include <cmath>

using namespace politeproxy;

namespace {

// The first line of `input`, which is consumed up to the next.
std::string_view take_line(std::string_view& input) {
    const auto eol = input.find('\n');
    const std::string_view line = input.substr(0, eol);
    input.remove_prefix(eol == std::string_view::npos ? input.size() : eol + 1);
    return line;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    std::string_view input = fuzz::text(data, size);
    const std::string_view user_agent = take_line(input);
    const std::string_view path = take_line(input);
    const auto rules = robots_rules::parse(input);
    if (const auto delay = rules.crawl_delay(user_agent))
        fuzz::require(*delay > 0 && std::isfinite(*delay), "a delay that is not positive and finite");
    fuzz::require(rules.allowed("/robots.txt", user_agent), "/robots.txt disallowed");
    const bool allowed = rules.allowed(path, user_agent);
    fuzz::require(rules.allowed(path, user_agent) == allowed, "two answers for one path");
    fuzz::require(rules.bytes() >= sizeof(robots_rules), "bytes() below the object's own size");
    fuzz::require(robots_rules::disallow_all().allowed(path, user_agent) == (path == "/robots.txt"),
                  "disallow_all() allows a path other than /robots.txt, or refuses /robots.txt");
    return 0;
}
