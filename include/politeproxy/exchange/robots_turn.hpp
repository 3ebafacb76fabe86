#pragma once
#include "politeproxy/exchange/permit.hpp"
#include "politeproxy/policy/robots_book.hpp"

#include <optional>
#include <string>

namespace politeproxy {

class host_gates;

/// A request's turn to fetch its origin's robots.txt (host_gates::robots_due), and the
/// hold it puts on its host's gate when it took the gate's slot at once: until the turn
/// ends, the gate lets none of the host's other requests depart. Move-only; when it
/// is destroyed, however the fetch ended (or if it never started), the gates hear what
/// it learnt: `read` (not_read unless the fetch says otherwise). A hold it took ends
/// then, and the book's next read is due after cache_ttl (or the host's backoff).
class robots_turn {
public:
    robots_turn() = default;
    robots_turn(robots_turn&& other) noexcept;
    robots_turn& operator=(robots_turn&&) = delete;
    ~robots_turn();
    explicit operator bool() const { return gates_ != nullptr; }  ///< the fetch is due
    const std::string& key() const { return key_; }               ///< the gate it goes through

    permit slot;  ///< taken at once when the gate was free: the gate then holds the host's other requests
    robots_read read;

private:
    friend class host_gates;
    host_gates* gates_ = nullptr;
    std::string origin_;
    std::string key_;
    bool held_ = false;
};

}  // namespace politeproxy
