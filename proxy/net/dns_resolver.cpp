#include "politeproxy/net/dns_resolver.hpp"

#include "politeproxy/base/log.hpp"
#include "politeproxy/base/metrics.hpp"
#include "politeproxy/config/config.hpp"
#include "politeproxy/net/origin_connect.hpp"
#include "politeproxy/policy/dns_message.hpp"

#include <ares.h>
#include <boost/asio/dispatch.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/this_coro.hpp>

#include <netdb.h>
#include <sys/socket.h>

#include <cassert>
#include <cstring>
#include <list>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <unordered_map>

namespace politeproxy {
namespace asio = boost::asio;
using tcp = asio::ip::tcp;

namespace {

// c-ares's first wait for one server's answer (it doubles on each try), and its tries
// per server: a server that drops queries costs 1 s + 2 s; one whose port refuses, none.
constexpr int query_timeout_ms = 1000;
constexpr int query_tries = 2;

dns_cache::settings cache_settings(const dns_config& c) {
    return {c.min_ttl, c.max_ttl, c.negative_ttl, c.stale_for, c.max_names};
}

// The addresses /etc/hosts gives `name` in `family`, appended to `out`.
void hosts_file(ares_channel channel, const std::string& name, int family, std::vector<ip_bytes>& out) {
    hostent* he = nullptr;
    if (ares_gethostbyname_file(channel, name.c_str(), family, &he) != ARES_SUCCESS || !he) return;
    for (char** a = he->h_addr_list; a && *a; ++a) {
        ip_bytes b{};
        if (family == AF_INET) {
            std::uint32_t v4 = 0;
            std::memcpy(&v4, *a, 4);
            b = ipv4_bytes(ntohl(v4));
        } else {
            std::memcpy(b.data(), *a, 16);
        }
        out.push_back(b);
    }
    ares_free_hostent(he);
}

}  // namespace

struct dns_resolver::impl {
    // A request waiting for a name's look-up; the look-up's end cancels its timer.
    struct waiter {
        explicit waiter(executor ex) : timer(std::move(ex)) {}
        steady_timer timer;
        std::mutex mutex;
        bool done = false;
        dns_cache::hit::kind what = dns_cache::hit::kind::miss;
        std::vector<ip_bytes> addresses;
    };

    struct lookup;

    // One worker's c-ares channel, driven by that worker's loop: a descriptor watch per
    // socket c-ares opens, a timer for its timeouts.
    struct channel {
        struct watch {
            explicit watch(asio::io_context& ioc) : d(ioc) {}
            asio::posix::stream_descriptor d;
            bool want_read = false, want_write = false, reading = false, writing = false, closed = false;
        };

        channel(impl& owner, asio::io_context& ioc) : owner(owner), ioc(ioc), timer(ioc.get_executor()) {
            ares_options o{};
            o.sock_state_cb = &channel::on_socket_state;
            o.sock_state_cb_data = this;
            o.timeout = query_timeout_ms;
            o.tries = query_tries;
            if (const int rc = ares_init_options(&ares, &o, ARES_OPT_SOCK_STATE_CB | ARES_OPT_TIMEOUTMS | ARES_OPT_TRIES);
                rc != ARES_SUCCESS)
                throw std::runtime_error(std::string("dns: cannot start the resolver: ") + ares_strerror(rc));
            if (!owner.servers.empty())
                if (const int rc = ares_set_servers_ports_csv(ares, owner.servers.c_str()); rc != ARES_SUCCESS) {
                    ares_destroy(ares);
                    throw std::runtime_error("dns.servers: " + std::string(ares_strerror(rc)));
                }
        }
        ~channel() {
            // The watches let go of c-ares's sockets first (c-ares closes them), then the
            // look-ups under way end, failed, into the owner's members (still alive).
            for (auto& [fd, w] : sockets) {
                w->closed = true;
                w->d.release();
            }
            sockets.clear();
            ares_destroy(ares);
        }

        // Called from inside c-ares: nothing may throw through its C frames. A socket
        // that cannot be watched is left to c-ares's own timeouts.
        static void on_socket_state(void* data, ares_socket_t fd, int readable, int writable) noexcept {
            auto& self = *static_cast<channel*>(data);
            auto it = self.sockets.find(fd);
            if (!readable && !writable) {
                if (it == self.sockets.end()) return;
                it->second->closed = true;
                it->second->d.release();  // c-ares closes it
                self.sockets.erase(it);
                return;
            }
            if (it == self.sockets.end()) {
                auto w = std::make_shared<watch>(self.ioc);
                boost::system::error_code ec;
                w->d.assign(fd, ec);
                if (ec) return;
                it = self.sockets.emplace(fd, std::move(w)).first;
            }
            it->second->want_read = readable;
            it->second->want_write = writable;
            self.arm(it->second, fd);
        }

        void arm(const std::shared_ptr<watch>& w, int fd) {
            if (w->want_read && !w->reading) {
                w->reading = true;
                w->d.async_wait(asio::posix::descriptor_base::wait_read, [this, w, fd](boost::system::error_code ec) {
                    w->reading = false;
                    if (ec || w->closed) return;
                    ares_process_fd(ares, fd, ARES_SOCKET_BAD);
                    after_work(w, fd);
                });
            }
            if (w->want_write && !w->writing) {
                w->writing = true;
                w->d.async_wait(asio::posix::descriptor_base::wait_write, [this, w, fd](boost::system::error_code ec) {
                    w->writing = false;
                    if (ec || w->closed) return;
                    ares_process_fd(ares, ARES_SOCKET_BAD, fd);
                    after_work(w, fd);
                });
            }
        }

        void after_work(const std::shared_ptr<watch>& w, int fd) {
            if (!w->closed) arm(w, fd);
            schedule_timeouts();
        }

        // c-ares's next timeout (a retry, another server, giving up), on the timer.
        void schedule_timeouts() {
            timeval tv{};
            if (!ares_timeout(ares, nullptr, &tv)) {
                timer.cancel();
                return;
            }
            timer.expires_after(std::chrono::seconds(tv.tv_sec) + std::chrono::microseconds(tv.tv_usec));
            timer.async_wait([this](boost::system::error_code ec) {
                if (ec) return;
                ares_process_fd(ares, ARES_SOCKET_BAD, ARES_SOCKET_BAD);
                schedule_timeouts();
            });
        }

        // One name: /etc/hosts, else A and AAAA at once; `done` gets the answer.
        void look_up(std::string name) {
            dns_answer from_file;
            hosts_file(ares, name, AF_INET6, from_file.v6);
            hosts_file(ares, name, AF_INET, from_file.v4);
            if (!from_file.v6.empty() || !from_file.v4.empty()) {
                from_file.what = dns_answer::outcome::found;
                from_file.ttl = owner.cfg.min_ttl;
                return owner.finish(name, from_file, clock::now(), false);
            }
            // A name with a dot is asked as it is (a crawl's names are whole; and after a
            // search c-ares reports NXDOMAIN without the SOA its TTL comes from); a short
            // one through resolv.conf's search list, as getaddrinfo would.
            auto& l = *lookups.emplace_back(std::make_unique<lookup>(lookup{&owner, std::move(name), clock::now()}));
            l.at = std::prev(lookups.end());
            l.from = this;
            const auto ask = l.name.find('.') != std::string::npos ? &ares_query : &ares_search;
            ask(ares, l.name.c_str(), 1 /* IN */, dns_type_a, &lookup::on_a, &l);
            ask(ares, l.name.c_str(), 1 /* IN */, dns_type_aaaa, &lookup::on_aaaa, &l);
            schedule_timeouts();
        }

        impl& owner;
        asio::io_context& ioc;
        ares_channel ares = nullptr;
        steady_timer timer;
        std::unordered_map<int, std::shared_ptr<watch>> sockets;
        std::list<std::unique_ptr<lookup>> lookups;  ///< under way; each ends itself out of the list
    };

    // One name's A and AAAA queries; ends when both have.
    struct lookup {
        impl* owner;
        std::string name;
        clock::time_point started;
        int outstanding = 2;
        bool failed = false;  // a query got no usable answer
        std::uint32_t found_ttl = UINT32_MAX;
        std::uint32_t negative_ttl = UINT32_MAX;
        dns_answer answer{};

        channel* from = nullptr;                              // its channel, which owns it
        std::list<std::unique_ptr<lookup>>::iterator at{};    // there

        static void on_a(void* arg, int status, int, unsigned char* buf, int len) noexcept {
            ended(static_cast<lookup*>(arg), status, buf, len, dns_type_a);
        }
        static void on_aaaa(void* arg, int status, int, unsigned char* buf, int len) noexcept {
            ended(static_cast<lookup*>(arg), status, buf, len, dns_type_aaaa);
        }
        // One query ended; with the other done too, the look-up leaves its channel.
        static void ended(lookup* l, int status, const unsigned char* buf, int len, std::uint16_t type) noexcept {
            if (l->heard(status, buf, len, type)) l->from->lookups.erase(l->at);
        }

        // True when both queries have ended and the owner has the answer.
        bool heard(int status, const unsigned char* buf, int len, std::uint16_t type) {
            const bool answered = buf && len > 0 && status != ARES_EDESTRUCTION && status != ARES_ECANCELLED;
            const dns_reply r = answered ? read_dns_reply({buf, static_cast<std::size_t>(len)}, type) : dns_reply{};
            switch (r.what) {
                case dns_reply::outcome::addresses: {
                    auto& into = type == dns_type_a ? answer.v4 : answer.v6;
                    into.insert(into.end(), r.addresses.begin(), r.addresses.end());
                    found_ttl = std::min(found_ttl, r.ttl);
                    break;
                }
                case dns_reply::outcome::no_such_name:
                case dns_reply::outcome::no_data:
                    negative_ttl = std::min(negative_ttl, r.ttl);
                    break;
                default:
                    failed = true;
            }
            if (--outstanding > 0) return false;
            if (!answer.v4.empty() || !answer.v6.empty()) {
                answer.what = dns_answer::outcome::found;
                answer.ttl = std::chrono::seconds(found_ttl);
            } else if (!failed) {
                answer.what = dns_answer::outcome::no_such_name;
                answer.ttl = std::chrono::seconds(negative_ttl == UINT32_MAX ? 0 : negative_ttl);
            }
            owner->finish(name, answer, started);
            return true;
        }
    };

    impl(const dns_config& cfg, metrics& m, const logger& log) : cfg(cfg), m(m), log(log), cache(cache_settings(cfg)) {
        static std::once_flag library;
        std::call_once(library, [] { ares_library_init(ARES_LIB_INIT_ALL); });
        for (const auto& s : cfg.servers) {
            if (!servers.empty()) servers += ',';
            servers += s.host.find(':') == std::string::npos ? s.host : "[" + s.host + "]";
            servers += ":" + std::to_string(s.port);
        }
    }

    channel& current_channel() {
        assert(!channels.empty() && "dns_resolver: resolve() before add_loop()");
        for (auto& c : channels)
            if (c->ioc.get_executor().running_in_this_thread()) return *c;
        return *channels.front();
    }

    // A look-up ended (`asked`: DNS, not /etc/hosts): kept in the cache, counted, and
    // every request waiting for it told. No lock is held while posting or logging.
    void finish(const std::string& name, const dns_answer& answer, clock::time_point started, bool asked = true) {
        const auto now = clock::now();
        std::vector<std::shared_ptr<waiter>> waiting;
        dns_cache::hit::kind what;
        std::vector<ip_bytes> addresses;
        std::size_t entries;
        {
            std::lock_guard lock(mutex);
            const auto hit = cache.store(name, answer, now);
            what = hit.what;
            addresses.assign(hit.addresses.begin(), hit.addresses.end());
            entries = cache.size();
            if (auto node = inflight.extract(name)) waiting = std::move(node.mapped());
        }
        if (asked) {
            const bool stale = answer.what == dns_answer::outcome::failed && what == dns_cache::hit::kind::stale;
            m.dns_query(answer.what == dns_answer::outcome::found          ? dns_result::ok
                        : answer.what == dns_answer::outcome::no_such_name ? dns_result::nxdomain
                        : stale                                            ? dns_result::stale
                                                                           : dns_result::error,
                        now - started);
            if (stale)
                log.write(log_level::warn, "dns",
                          name + ": the look-up failed; its expired addresses are served for up to dns.stale_for");
        }
        m.dns_cache_entries(entries);
        for (auto& w : waiting) {
            {
                std::lock_guard done(w->mutex);
                w->done = true;
                w->what = what;
                w->addresses = addresses;
            }
            asio::post(w->timer.get_executor(), [w] { w->timer.cancel(); });
        }
    }

    const dns_config cfg;  ///< as at start: a reload does not change it
    metrics& m;
    const logger& log;
    std::string servers;  ///< dns.servers for c-ares, "a:p,[b]:p"; empty: resolv.conf
    std::mutex mutex;     ///< cache, inflight
    dns_cache cache;
    std::unordered_map<std::string, std::vector<std::shared_ptr<waiter>>> inflight;  ///< by name
    std::vector<std::unique_ptr<channel>> channels;  ///< last: destroyed first (their look-ups end into the above)
};

dns_resolver::dns_resolver(const dns_config& cfg, metrics& m, const logger& log)
    : impl_(std::make_unique<impl>(cfg, m, log)) {}

dns_resolver::~dns_resolver() = default;

void dns_resolver::add_loop(asio::io_context& ioc) { impl_->channels.push_back(std::make_unique<impl::channel>(*impl_, ioc)); }

std::optional<dns_resolver::few_addresses> dns_resolver::cached_now(std::string_view name) {
    using kind = dns_cache::hit::kind;
    std::lock_guard lock(impl_->mutex);
    const auto hit = impl_->cache.find(name, clock::now());
    if (hit.what != kind::fresh && hit.what != kind::stale) return std::nullopt;
    few_addresses out;
    out.size = std::min(hit.addresses.size(), out.at.size());
    std::copy_n(hit.addresses.begin(), out.size, out.at.begin());
    return out;
}

clock::duration dns_resolver::attempt_delay() const { return impl_->cfg.connection_attempt_delay; }

metrics& dns_resolver::counters() const { return impl_->m; }

dns_resolver::cached dns_resolver::peek(const std::string& name) const {
    std::lock_guard lock(impl_->mutex);
    const auto hit = impl_->cache.peek(name, clock::now());
    return {hit.what, {hit.addresses.begin(), hit.addresses.end()}, hit.expires};
}

task<dns_resolver::result> dns_resolver::resolve(std::string host, std::uint16_t port, clock::time_point deadline) {
    using kind = dns_cache::hit::kind;
    auto& d = *impl_;
    auto endpoints = [port](std::span<const ip_bytes> addresses) {
        result r;
        r.endpoints.reserve(addresses.size());
        for (const auto& a : addresses) r.endpoints.emplace_back(address_of(a), port);
        return r;
    };
    std::optional<result> known;
    std::shared_ptr<impl::waiter> w;  // a name not cached only
    const auto ex = co_await asio::this_coro::executor;
    bool ask = false;
    {
        std::lock_guard lock(d.mutex);
        const auto hit = d.cache.find(host, clock::now());
        if (hit.what == kind::fresh || hit.what == kind::stale) {
            known = endpoints(hit.addresses);
        } else if (hit.what == kind::negative) {
            known = result{asio::error::host_not_found, {}};
        } else {
            w = std::make_shared<impl::waiter>(ex);
            auto& waiting = d.inflight[host];
            ask = waiting.empty();
            waiting.push_back(w);
        }
    }
    if (known) co_return std::move(*known);
    if (ask) {
        auto& ch = d.current_channel();
        asio::dispatch(ch.ioc, [&ch, host] { ch.look_up(host); });
    }
    w->timer.expires_at(deadline);
    for (;;) {
        auto [ec] = co_await w->timer.async_wait(use_tuple);
        const bool cancelled =
            (co_await asio::this_coro::cancellation_state).cancelled() != asio::cancellation_type::none;
        std::lock_guard lock(w->mutex);
        if (w->done) {
            if (w->what == kind::fresh || w->what == kind::stale) co_return endpoints(w->addresses);
            if (w->what == kind::negative) co_return result{asio::error::host_not_found, {}};
            co_return result{asio::error::host_not_found_try_again, {}};
        }
        if (cancelled) co_return result{asio::error::operation_aborted, {}};
        if (!ec) co_return result{asio::error::timed_out, {}};
    }
}

}  // namespace politeproxy
