#pragma once
#include "politeproxy/base/executor.hpp"
#include "politeproxy/net/timed_socket.hpp"

#include <cstddef>
#include <functional>
#include <memory>
#include <mutex>
#include <unordered_set>

namespace politeproxy {

/// The open client sessions, so that a drain can close the ones that sit idle between
/// keep-alive requests while the busy ones finish.
///
/// Thread safety: add/remove/close_idle from any thread. A handle's `stream` and `idle`
/// are only touched on its session's executor; close_idle posts there.
class session_set {
public:
    struct handle {
        politeproxy::executor executor;  ///< the session's worker loop
        timed_socket* stream = nullptr;
        bool idle = false;  ///< waiting for the next request, nothing read yet
        /// Set while the session can wind down by itself (an HTTP/2 connection: GOAWAY,
        /// then the close once its streams are done); a drain calls it instead of
        /// closing an idle session.
        std::function<void()> drain;
    };

    /// Registers a session for as long as the returned guard lives.
    class registration {
    public:
        registration(session_set& set, std::shared_ptr<handle> h) : set_(set), handle_(std::move(h)) {}
        registration(const registration&) = delete;
        registration& operator=(const registration&) = delete;
        ~registration() { set_.remove(handle_); }
        handle& get() { return *handle_; }

    private:
        session_set& set_;
        std::shared_ptr<handle> handle_;
    };

    std::shared_ptr<handle> add(politeproxy::executor executor, timed_socket& stream);
    void remove(const std::shared_ptr<handle>& h);

    /// Cancels the pending read of every idle session, and tells the ones that can wind
    /// down by themselves to do so (handle::drain); busy ones are left alone.
    void close_idle();

    std::size_t size() const;

private:
    mutable std::mutex mutex_;
    std::unordered_set<std::shared_ptr<handle>> sessions_;
};

}  // namespace politeproxy
