// The counter sink: the latency histograms, counted without a lock, show every
// observation made before the registry is read, in the buckets Prometheus expects (le).
#include "politeproxy/base/metrics.hpp"

#include <prometheus/metric_family.h>

#include <doctest/doctest.h>

#include <string>

using namespace politeproxy;
using namespace std::chrono_literals;

namespace {

const prometheus::ClientMetric::Histogram& histogram_of(const std::vector<prometheus::MetricFamily>& families,
                                                      const std::string& name) {
    for (const auto& f : families)
        if (f.name == name) return f.metric.at(0).histogram;
    FAIL("no family " << name);
    throw 0;
}

std::uint64_t cumulative(const prometheus::ClientMetric::Histogram& h, double le) {
    for (const auto& b : h.bucket)
        if (b.upper_bound == le) return b.cumulative_count;
    FAIL("no bucket le=" << le);
    return 0;
}

}  // namespace

TEST_CASE("latency histograms: every observation before a read, in its le bucket, with its sum") {
    metrics m;
    m.queue_wait(3ms);
    m.queue_wait(5ms);  // on the bound: le 0.005 holds it
    m.queue_wait(0ns);
    m.origin_response(200s);  // beyond the last bound: +Inf only
    auto families = m.collect();
    const auto& wait = histogram_of(families, std::string(metric_prefix) + "queue_wait_seconds");
    CHECK(wait.sample_count == 3);
    CHECK(wait.sample_sum == doctest::Approx(0.008));
    CHECK(cumulative(wait, 0.001) == 1);
    CHECK(cumulative(wait, 0.0025) == 1);
    CHECK(cumulative(wait, 0.005) == 3);
    const auto& response = histogram_of(families, std::string(metric_prefix) + "upstream_response_seconds");
    CHECK(response.sample_count == 1);
    CHECK(cumulative(response, 120) == 0);

    m.queue_wait(1s);  // counted again after a read: reads add up, nothing is counted twice
    families = m.collect();
    const auto& again = histogram_of(families, std::string(metric_prefix) + "queue_wait_seconds");
    CHECK(again.sample_count == 4);
    CHECK(again.sample_sum == doctest::Approx(1.008));
    CHECK(cumulative(again, 1) == 4);
    CHECK(cumulative(again, 0.5) == 3);
}
