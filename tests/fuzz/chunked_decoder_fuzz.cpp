// The strict chunked decoder, fed the input in pieces of a size the first byte picks,
// into a room of a size the second picks. Invariants: it never overruns input or room;
// the split does not change the result; a body it decodes whole, re-chunked as the
// relay writes it, decodes to the same bytes.
#include "fuzz_input.hpp"

#include "politeproxy/http1/chunked_decoder.hpp"

#include <algorithm>
#include <charconv>
#include <string>
#include <vector>

using namespace politeproxy;

namespace {

struct outcome {
    std::string body;
    std::size_t consumed = 0;
    bool done = false, failed = false;
};

outcome decode(std::string_view input, std::size_t step, std::size_t room_size) {
    chunked_decoder d;
    outcome o;
    std::vector<char> room(room_size);
    std::size_t available = std::min(step, input.size());
    while (!d.done() && !d.failed()) {
        const auto r = d.decode(input.substr(o.consumed, available - o.consumed), room);
        fuzz::require(r.consumed <= available - o.consumed, "consumed more than given");
        fuzz::require(r.written <= room.size(), "wrote past the room");
        o.body.append(room.data(), r.written);
        o.consumed += r.consumed;
        if (r.consumed == 0 && r.written == 0) {
            if (available == input.size()) break;
            available = std::min(available + step, input.size());
        }
    }
    o.done = d.done();
    o.failed = d.failed();
    return o;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    if (size < 2) return 0;
    const std::size_t step = 1 + data[0] % 16;
    const std::size_t room = 1 + data[1] % 32;
    const std::string_view input = fuzz::text(data + 2, size - 2);
    const outcome split = decode(input, step, room);
    const outcome whole = decode(input, input.size() + 1, input.size() + 1);
    fuzz::require(split.done == whole.done && split.failed == whole.failed, "the split changed the verdict");
    fuzz::require(split.body == whole.body.substr(0, split.body.size()), "the split changed the bytes");
    if (!whole.done) return 0;
    fuzz::require(split.body == whole.body && split.consumed == whole.consumed, "the split changed the message");
    std::string again;
    char digits[20];
    if (!whole.body.empty()) {
        again.append(digits, std::to_chars(digits, digits + sizeof digits, whole.body.size(), 16).ptr);
        again += "\r\n" + whole.body + "\r\n";
    }
    again += "0\r\n\r\n";
    const outcome round = decode(again, again.size(), again.size() + 1);
    fuzz::require(round.done && round.body == whole.body, "re-chunked body does not decode to the same bytes");
    return 0;
}
