// What a fleet store sends back, as hostile bytes: the reader never crashes or buffers
// past its bound, and every reply read as a script's answer has figures the proxy can
// hold (no overflowing count or time point); a cluster's slot map and redirections read
// from it name only slots that exist and ports that can be dialled.
#include "fuzz_input.hpp"

#include "politeproxy/fleet/cluster_slots.hpp"
#include "politeproxy/fleet/lease_scripts.hpp"
#include "politeproxy/fleet/redis_reply.hpp"

#include <chrono>

using namespace politeproxy;
using namespace politeproxy::fleet;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    if (size == 0) return 0;
    // The first byte picks how the rest arrives: in reads of 1..256 bytes.
    const std::size_t piece = std::size_t{data[0]} + 1;
    const auto bytes = fuzz::text(data + 1, size - 1);
    redis_reply_reader reader(4096);
    redis_reply r;
    for (std::size_t at = 0; at < bytes.size(); at += piece) {
        if (!reader.feed(bytes.substr(at, piece))) break;
        for (auto s = reader.next(r); s == redis_reply_reader::status::reply; s = reader.next(r)) {
            if (const auto a = read_acquire_reply(r)) {
                fuzz::require(a->limit >= 1, "a limit below 1");
                fuzz::require(a->rate >= 0, "a negative rate");
                fuzz::require(a->paused_for >= clock::duration::zero() && a->paused_for <= std::chrono::hours(24 * 30),
                              "a pause outside [0, 30 days]");
                fuzz::require(a->token_in >= clock::duration::zero() && a->token_in <= std::chrono::hours(24 * 30),
                              "a token wait outside [0, 30 days]");
                fuzz::require(a->held <= 1'000'000'000, "a count past its clamp");
            }
            const node_address asked{"10.0.0.1", 7000};
            if (const auto ranges = read_cluster_slots(r, asked))
                for (const auto& range : *ranges)
                    fuzz::require(range.first <= range.last && range.last < cluster_slots && range.master.port != 0,
                                  "a slot range outside the cluster, or a node without a port");
            if (r.is_error())
                if (const auto to = read_redirection(r.text, asked))
                    fuzz::require(to->slot < cluster_slots && to->to.port != 0 && !to->to.host.empty(),
                                  "a redirection to no slot or no node");
            if (const auto n = read_renew_reply(r))
                fuzz::require(n->lost <= 1'000'000'000 && n->held <= 1'000'000'000, "a count past its clamp");
        }
    }
    return 0;
}
