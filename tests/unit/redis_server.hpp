#pragma once
// A redis-server of the test's own: spawned on a free loopback port with no persistence,
// stopped by PID when the object goes. For tests that run the real Lua scripts.
#include <hiredis/hiredis.h>

#include <netinet/in.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

extern char** environ;

namespace politeproxy::testing {

inline int free_loopback_port() {
    const int s = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ::bind(s, reinterpret_cast<sockaddr*>(&a), sizeof a);
    socklen_t len = sizeof a;
    ::getsockname(s, reinterpret_cast<sockaddr*>(&a), &len);
    ::close(s);
    return ntohs(a.sin_port);
}

using reply_ptr = std::unique_ptr<redisReply, void (*)(void*)>;

class redis_server {
public:
    /// On `port` (0: a free one): a restart on the same port is a new redis_server.
    explicit redis_server(int port = 0) : port_(port ? port : free_loopback_port()) {
        const std::string port_text = std::to_string(port_);
        std::vector<std::string> args{"redis-server", "--port", port_text, "--bind", "127.0.0.1", "--save", "",
                                      "--appendonly", "no", "--loglevel", "warning", "--logfile", "/dev/null"};
        std::vector<char*> argv;
        for (auto& a : args) argv.push_back(a.data());
        argv.push_back(nullptr);
        if (::posix_spawnp(&pid_, "redis-server", nullptr, nullptr, argv.data(), environ) != 0)
            throw std::runtime_error("cannot start redis-server (apt-get install redis-server)");
        for (int i = 0; i < 500; ++i) {
            ctx_ = redisConnect("127.0.0.1", port_);
            if (ctx_ && !ctx_->err) return;
            if (ctx_) redisFree(ctx_);
            ctx_ = nullptr;
            std::this_thread::sleep_for(std::chrono::milliseconds(10));
        }
        stop();
        throw std::runtime_error("redis-server did not start on port " + port_text);
    }
    ~redis_server() {
        if (ctx_) redisFree(ctx_);
        stop();
    }
    redis_server(const redis_server&) = delete;
    redis_server& operator=(const redis_server&) = delete;

    int port() const { return port_; }

    /// One command, synchronously (tests only).
    reply_ptr command(const std::vector<std::string>& args) {
        std::vector<const char*> argv;
        std::vector<std::size_t> lengths;
        for (const auto& a : args) {
            argv.push_back(a.data());
            lengths.push_back(a.size());
        }
        auto* r = static_cast<redisReply*>(
            redisCommandArgv(ctx_, static_cast<int>(args.size()), argv.data(), lengths.data()));
        if (!r) throw std::runtime_error("redis: connection error");
        return reply_ptr(r, freeReplyObject);
    }

    /// The store's clock, in milliseconds.
    long long now_ms() {
        auto t = command({"TIME"});
        return std::stoll(t->element[0]->str) * 1000 + std::stoll(t->element[1]->str) / 1000;
    }

private:
    void stop() {
        if (pid_ > 0) {
            ::kill(pid_, SIGKILL);
            ::waitpid(pid_, nullptr, 0);
            pid_ = 0;
        }
    }
    int port_;
    pid_t pid_ = 0;
    redisContext* ctx_ = nullptr;
};

}  // namespace politeproxy::testing
