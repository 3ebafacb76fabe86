#pragma once
// A discrete-event simulation for the adaptive controller: a backlogged client whose
// requests leave through one host's adaptive_limit (as host_gates would let them) to an
// origin of C workers with a FIFO queue, whose capacity follows a schedule, and which
// answers 503 at once to a request that finds `wall_factor` x C already waiting. Time
// is simulated: no sockets, no sleeps, no wall clock.
#include "politeproxy/policy/adaptive_limit.hpp"

#include <cstdint>
#include <deque>
#include <functional>
#include <queue>
#include <random>
#include <vector>

namespace politeproxy::test {

struct capacity_phase {
    std::size_t workers;
    clock::duration length;
};

struct phase_report {
    std::size_t workers = 0;
    std::uint64_t ok = 0;           ///< 200s finished in the phase
    std::uint64_t rejected = 0;     ///< 503s
    double mean_waiting = 0;        ///< time-average of the origin's queue
    double share_within_one = 0;    ///< share of time with |in flight at origin - C| <= 1
    double goodput = 0;             ///< ok / (phase x min(C, configured) / mean service)
    std::optional<double> reached_within_one;  ///< seconds after the change until within 1 of C for good (>= 1 s)
};

class simulated_origin {
public:
    enum class service_shape { constant, exponential };

    simulated_origin(const host_policy& policy, service_shape shape, clock::duration mean_service,
                     std::uint64_t seed = 1, double wall_factor = 2.0)
        : policy_(policy), controller_(policy, start_), shape_(shape), mean_(mean_service), random_(seed),
          wall_factor_(wall_factor) {}

    /// Runs the schedule; `observe` sees the controller after every event.
    std::vector<phase_report> run(const std::vector<capacity_phase>& schedule,
                                  const std::function<void(clock::time_point, const adaptive_limit&)>& observe = {}) {
        std::vector<phase_report> reports;
        clock::time_point t = start_;
        for (const auto& phase : schedule) {
            workers_ = phase.workers;
            start_service(t);
            phase_report r;
            r.workers = phase.workers;
            const auto end = t + phase.length;
            double waiting_area = 0, within_time = 0;
            std::optional<clock::time_point> within_since;
            depart(t);
            while (true) {
                const auto next = events_.empty() ? end : std::min(end, events_.top().at);
                const double dt = std::chrono::duration<double>(next - t).count();
                waiting_area += static_cast<double>(waiting_.size()) * dt;
                const bool within = at_origin() + 1 >= workers_ && at_origin() <= workers_ + 1;
                if (within) {
                    within_time += dt;
                    if (!within_since) within_since = t;
                } else {
                    within_since.reset();
                }
                if (!r.reached_within_one && within_since && next - *within_since >= std::chrono::seconds(1))
                    r.reached_within_one = std::chrono::duration<double>(*within_since - (end - phase.length)).count();
                t = next;
                if (events_.empty() || events_.top().at > end) break;
                const event e = events_.top();
                events_.pop();
                handle(e, t, r);
                depart(t);
                if (observe) observe(t, controller_);
            }
            const double length = std::chrono::duration<double>(phase.length).count();
            r.mean_waiting = waiting_area / length;
            r.share_within_one = within_time / length;
            const double level = static_cast<double>(std::min(phase.workers, policy_.concurrency));
            r.goodput = static_cast<double>(r.ok) / (length * level / std::chrono::duration<double>(mean_).count());
            reports.push_back(r);
        }
        return reports;
    }

    const adaptive_limit& controller() const { return controller_; }

private:
    struct request {
        clock::time_point departed;
        std::uint64_t epoch;
    };
    struct event {
        clock::time_point at;
        std::uint64_t order;
        enum class kind { finished, rejected, wake } what;
        request req;
        bool operator>(const event& o) const { return at != o.at ? at > o.at : order > o.order; }
    };

    std::size_t at_origin() const { return busy_ + waiting_.size(); }

    clock::duration service() {
        if (shape_ == service_shape::constant) return mean_;
        std::exponential_distribution<double> d(1.0 / std::chrono::duration<double>(mean_).count());
        return std::chrono::duration_cast<clock::duration>(std::chrono::duration<double>(d(random_)));
    }

    void push(clock::time_point at, event::kind what, request req) { events_.push({at, ++order_, what, req}); }

    void start_service(clock::time_point t) {
        while (busy_ < workers_ && !waiting_.empty()) {
            ++busy_;
            push(t + service(), event::kind::finished, waiting_.front());
            waiting_.pop_front();
        }
    }

    // The client: a request leaves whenever the controller allows one more in flight.
    void depart(clock::time_point t) {
        if (t < controller_.paused_until()) {
            if (!wake_pending_) {
                wake_pending_ = true;
                push(controller_.paused_until(), event::kind::wake, {});
            }
            return;
        }
        while (in_flight_ < controller_.limit()) {
            ++in_flight_;
            const request req{t, controller_.epoch()};
            if (static_cast<double>(waiting_.size()) >= wall_factor_ * static_cast<double>(workers_)) {
                push(t, event::kind::rejected, req);
                continue;
            }
            waiting_.push_back(req);
            start_service(t);
        }
    }

    void handle(const event& e, clock::time_point t, phase_report& r) {
        const auto half = [] { return 0.5; };
        switch (e.what) {
            case event::kind::wake: wake_pending_ = false; break;
            case event::kind::finished: {
                --busy_;
                --in_flight_;
                ++r.ok;
                start_service(t);
                auto signal = health_signal::answered(t - e.req.departed);
                signal.epoch = e.req.epoch;
                controller_.on_signal(signal, t, half);
                break;
            }
            case event::kind::rejected: {
                --in_flight_;
                ++r.rejected;
                auto signal = health_signal::throttled_by(t - e.req.departed, std::chrono::seconds(1));
                signal.epoch = e.req.epoch;
                controller_.on_signal(signal, t, half);
                break;
            }
        }
        controller_.tick(t);
    }

    const host_policy& policy_;
    clock::time_point start_ = clock::time_point{} + std::chrono::hours(1);
    adaptive_limit controller_;
    service_shape shape_;
    clock::duration mean_;
    std::mt19937_64 random_;
    double wall_factor_;
    std::size_t workers_ = 1;
    std::size_t busy_ = 0;
    std::size_t in_flight_ = 0;
    std::deque<request> waiting_;
    std::priority_queue<event, std::vector<event>, std::greater<>> events_;
    std::uint64_t order_ = 0;
    bool wake_pending_ = false;
};

}  // namespace politeproxy::test
