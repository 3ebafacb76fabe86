#pragma once
#include "politeproxy/clock.hpp"
#include "politeproxy/outcome.hpp"

#include <memory>
#include <string>

namespace politeproxy {

class host_gates;
struct host_entry;
struct host_policy;

/// One granted slot of one host's gate. Move-only; the destructor gives the slot back
/// and records how the request ended, so no path (success, error, timeout, client gone,
/// exception) can leak it. An empty permit owns nothing.
///
/// Thread safety: one owner at a time; release takes the gate's lock.
class permit {
public:
    permit() = default;
    permit(permit&& other) noexcept;
    permit& operator=(permit&& other) noexcept;
    permit(const permit&) = delete;
    permit& operator=(const permit&) = delete;
    ~permit();

    explicit operator bool() const { return entry_ != nullptr; }

    /// Recorded when the permit is released; `error` unless set.
    void set_outcome(outcome o) { outcome_ = o; }
    clock::duration queue_wait() const { return queue_wait_; }
    const std::string& key() const;
    const host_policy& policy() const;

    /// Gives the slot back now (the destructor does it otherwise).
    void reset();

private:
    friend class host_gates;
    permit(host_gates* owner, std::shared_ptr<host_entry> entry, clock::duration queue_wait)
        : owner_(owner), entry_(std::move(entry)), queue_wait_(queue_wait) {}

    host_gates* owner_ = nullptr;
    std::shared_ptr<host_entry> entry_;
    clock::duration queue_wait_{};
    outcome outcome_ = outcome::error;
};

}  // namespace politeproxy
