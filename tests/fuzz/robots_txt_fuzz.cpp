// robots.txt: any bytes give an answer (a positive, finite delay or none), never a crash.
// The first line of the input is the client's User-Agent, the rest the file.
#include "fuzz_input.hpp"

#include "politeproxy/policy/robots_txt.hpp"

#include <cmath>

using namespace politeproxy;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    const std::string_view input = fuzz::text(data, size);
    const auto eol = input.find('\n');
    const std::string_view user_agent = input.substr(0, eol);
    const std::string_view file = eol == std::string_view::npos ? std::string_view{} : input.substr(eol + 1);
    if (const auto delay = crawl_delay_for(file, user_agent))
        fuzz::require(*delay > 0 && std::isfinite(*delay), "a delay that is not positive and finite");
    return 0;
}
