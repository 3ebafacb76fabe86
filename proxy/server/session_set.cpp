#include "politeproxy/server/session_set.hpp"

#include <boost/asio/post.hpp>

#include <vector>

namespace politeproxy {

std::shared_ptr<session_set::handle> session_set::add(politeproxy::executor executor,
                                                      timed_socket& stream) {
    auto h = std::make_shared<handle>(handle{std::move(executor), &stream, false, {}});
    std::lock_guard lock(mutex_);
    sessions_.insert(h);
    return h;
}

void session_set::remove(const std::shared_ptr<handle>& h) {
    h->stream = nullptr;  // on the session's executor, like every other use
    std::lock_guard lock(mutex_);
    sessions_.erase(h);
}

void session_set::close_idle() {
    std::vector<std::shared_ptr<handle>> all;
    {
        std::lock_guard lock(mutex_);
        all.assign(sessions_.begin(), sessions_.end());
    }
    for (auto& h : all)
        boost::asio::post(h->executor, [h] {
            if (h->stream && h->drain)
                h->drain();
            else if (h->stream && h->idle)
                h->stream->cancel();
        });
}

std::size_t session_set::size() const {
    std::lock_guard lock(mutex_);
    return sessions_.size();
}

}  // namespace politeproxy
